"""The tokenizer's splitter of unseen tokens into words, with it and without it in one
run: for each treebank, the tokenizer trained on the train split (nothing else), the
test split's raw text tokenized (no train split here: trained on dev), Tokens and Words F1 by ``arboreal.evaluation_ud``
(CoNLL 2018), and how many test tokens were split by the splitter.

    python benchmarks/mwt_split.py [--treebanks UD_Coptic-Scriptorium ...] [--no-write]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from udpipe_baseline import raw_text, split_path  # noqa: E402

DEFAULT = ["UD_Coptic-Scriptorium", "UD_English-EWT", "UD_Greek-GDT", "UD_Turkish-IMST",
           "UD_Wolof-WTB", "UD_Welsh-CCG", "UD_Spanish-AnCora"]


def tokenize_and_score(tokenizer, test: Path, work: Path) -> dict:
    from arboreal.evaluation_ud import evaluate_ud
    from arboreal.io.conllu import write_conllu

    paragraphs = [p for p in raw_text(test).split("\n\n") if p.strip()]
    t0 = time.perf_counter()
    sentences = list(tokenizer.tokenize(paragraphs))
    seconds = time.perf_counter() - t0
    for s in sentences:           # a tree the evaluator accepts: every word on the root
        s.heads[1:] = 0
    out = work / "system.conllu"
    write_conllu(sentences, out)
    result = evaluate_ud(str(test), str(out))
    return {m: round(100.0 * result[m]["f1"], 2) for m in ("Tokens", "Words", "Sentences")} | {
        "seconds": round(seconds, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebanks", nargs="+", default=DEFAULT)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--note", default="", help="a line under the table (what else ran)")
    args = ap.parse_args(argv)
    import arboreal.models.tokenizer as tk
    from arboreal.io.conllu import read_conllu

    rows = []
    for tb in args.treebanks:
        test = split_path(tb, "test")
        try:
            train, trained_on = split_path(tb, "train"), "train"
        except ValueError:          # no train split here (MANIFEST.md): train on dev
            train, trained_on = split_path(tb, "dev"), "dev"
        sentences = read_conllu(train)
        row = {"treebank": tb, "trained_on": trained_on}
        for name, minimum in (("without", 1 << 62), ("with", tk.MIN_SPLIT_TYPES)):
            saved = tk.MIN_SPLIT_TYPES
            tk.MIN_SPLIT_TYPES = minimum
            try:
                t0 = time.perf_counter()
                tokenizer = tk.Tokenizer.train(sentences)
                train_seconds = time.perf_counter() - t0
            finally:
                tk.MIN_SPLIT_TYPES = saved
            with tempfile.TemporaryDirectory() as tmp:
                row[name] = tokenize_and_score(tokenizer, test, Path(tmp))
            row[name]["train_seconds"] = round(train_seconds, 1)
            row[name]["splitter"] = tokenizer.split_weights is not None
        print(json.dumps(row), flush=True)
        rows.append(row)
    if not args.no_write:
        from _report import command_line, write_section

        lines = ["| treebank | trained on | splitter trained | Tokens F1 | Words F1 without | Words F1 with | "
                 "tokenizer training s (without / with) |", "|---|---|---|---:|---:|---:|---:|"]
        for r in rows:
            a, b = r["without"], r["with"]
            lines.append(f"| {r['treebank']} | {r['trained_on']} | "
                         f"{'yes' if b['splitter'] else 'no'} | "
                         f"{b['Tokens']:.2f} | {a['Words']:.2f} | {b['Words']:.2f} | "
                         f"{a['train_seconds']:.0f} / {b['train_seconds']:.0f} |")
        body = ("The tokenizer alone, trained on each train split with the splitter of unseen "
                "tokens and without it (the same run), on the test split's raw text; F1 by "
                "`arboreal.evaluation_ud`. A treebank without a train split here is "
                "trained on its dev split.\n\n" + "\n".join(lines) + "\n"
                + (f"\n{args.note}\n" if args.note else ""))
        write_section("mwt_split", "Multiword tokens: the splitter of unseen tokens",
                      command_line("mwt_split.py", argv if argv is not None else sys.argv[1:],
                                   args.note),
                      body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
