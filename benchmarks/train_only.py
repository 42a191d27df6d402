"""Treebanks without a dev split: order 2 against order 1, and the pruner's recall
(issue 38, "Train-only treebanks").

Each treebank's dev split is held out entirely, so that it behaves like a treebank
without one: ``arboreal train TRAIN -o M --no-tagger --no-tokenizer --order K`` for K = 1
and 2, with every other option its default (no ``--dev``: the order-2 pruner is then
tuned on a held-out tenth of the training sentences, which the model's metadata names),
then ``arboreal parse M TEST`` (gold UPOS given) scored by ``arboreal.evaluate``. For
order 2 it reports the share of gold heads the pruner claimed to keep on the data it
was tuned on (the model's metadata) beside the share it keeps on the test split.

    python benchmarks/train_only.py [--treebanks UD_Welsh-CCG ...] [--work-dir DIR]
        [--no-write] [--note TEXT]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from resume import run  # noqa: E402
from udpipe_baseline import UD, split_path  # noqa: E402

#: complete treebanks with a dev split, of several families and sizes
DEFAULT_TREEBANKS = ["UD_Welsh-CCG", "UD_Afrikaans-AfriBooms", "UD_Hungarian-Szeged", "UD_Greek-GDT",
                     "UD_Turkish-IMST", "UD_Czech-CLTT", "UD_Gothic-PROIEL"]
#: the bar: order 2 is never below order 1 by more than this (test UAS)
TOLERANCE = 0.2


def arboreal(*argv: str) -> float:
    """Wall seconds of ``arboreal ARGV`` (SystemExit with its stderr when it fails)."""
    return run(list(argv))[1]


def run_treebank(treebank: str, work: Path) -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    import arboreal as A
    from arboreal.io.conllu import read_conllu
    from arboreal.io.model_file import load_model_file

    train, test = split_path(treebank, "train"), split_path(treebank, "test")
    work.mkdir(parents=True, exist_ok=True)
    out = {"treebank": treebank, "train_sentences": len(read_conllu(train))}
    for order in (1, 2):
        model, parsed = work / f"{treebank}.o{order}.model", work / f"{treebank}.o{order}.conllu"
        t_train = arboreal("train", str(train), "-o", str(model), "--no-tagger",
                           "--no-tokenizer", "--order", str(order), "--quiet")
        arboreal("parse", str(model), str(test), "-o", str(parsed), "--quiet")
        scores = A.evaluate(str(test), str(parsed))
        row = {"uas": scores["uas"], "las": scores["las"], "train_s": t_train}
        if order == 2:
            meta, _ = load_model_file(model)
            pruning = meta["training"]["higher_order"]
            choice = pruning["temperature_choice"]
            recall, per_word = A.load(str(model)).pruning_recall(read_conllu(test))
            row.update(tuned_on=choice["on"], claimed=100 * choice["gold_heads_kept"],
                       target=100 * choice["target"], test_recall=100 * recall,
                       kept_per_word=per_word)
        out[f"order{order}"] = row
    out["difference"] = out["order2"]["uas"] - out["order1"]["uas"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebanks", nargs="+", default=DEFAULT_TREEBANKS)
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "train_only")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    if not UD.exists():
        raise SystemExit(f"{UD} not found")
    results = []
    for tb in args.treebanks:
        r = run_treebank(tb, args.work_dir)
        print(json.dumps(r), flush=True)
        results.append(r)
    (args.work_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    below = [r["treebank"] for r in results if r["difference"] < -TOLERANCE]
    if not args.no_write:
        from _report import command_line, write_section

        lines = ["| treebank (train sentences) | order 1 UAS / LAS | order 2 UAS / LAS | "
                 "order 2 - order 1, UAS | pruner tuned on | gold heads kept: target / "
                 "claimed there / on test | heads kept per test word | train s, order 1 / 2 |",
                 "|---|---:|---:|---:|---|---:|---:|---:|"]
        for r in results:
            o1, o2 = r["order1"], r["order2"]
            lines.append(
                f"| {r['treebank']} ({r['train_sentences']:,}) | {o1['uas']:.2f} / "
                f"{o1['las']:.2f} | {o2['uas']:.2f} / {o2['las']:.2f} | "
                f"{r['difference']:+.2f} | {o2['tuned_on']} | {o2['target']:.1f} / "
                f"{o2['claimed']:.2f} / {o2['test_recall']:.2f} | {o2['kept_per_word']:.2f} | "
                f"{o1['train_s']:.0f} / {o2['train_s']:.0f} |")
        verdict = (f"Order 2 is below order 1 by more than {TOLERANCE} UAS on: "
                   f"{', '.join(below)}." if below else
                   f"Order 2 is nowhere below order 1 by more than {TOLERANCE} UAS.")
        body = ("Each treebank's dev split held out entirely (as for a treebank without "
                "one); `arboreal train TRAIN -o M --no-tagger --no-tokenizer --order K` "
                "(every other option its default, no `--dev`), then `arboreal parse M TEST` "
                "with gold UPOS, scored by `arboreal.evaluate` (every word counted). The "
                "order-2 pruner's share of gold heads kept: the target, what it claimed on "
                "the sentences it was tuned on (the model's metadata), and what it keeps on "
                "the test split.\n\n" + "\n".join(lines) + f"\n\n{verdict}\n"
                + (f"\n{args.note}\n" if args.note else ""))
        write_section("train_only", "Treebanks without a dev split: order 2 and the pruner",
                      command_line("train_only.py", argv if argv is not None
                                                 else sys.argv[1:], args.note), body)
    return 1 if below else 0


if __name__ == "__main__":
    raise SystemExit(main())
