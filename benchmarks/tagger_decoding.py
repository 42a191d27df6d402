"""Greedy vs Viterbi decoding of the tagger's stages (issue 14: "Viterbi or greedy
decoding chosen on dev").

For each treebank and each decoding setting, ``Tagger.train(train, dev, decoding=...)``
(best epoch per stage on dev, as ``arboreal train --dev`` does) is timed in process,
then the dev and test splits are tagged from gold tokenization with every tag and lemma
blanked and scored by ``arboreal.evaluation_ud`` (the CoNLL 2018 method: UPOS, XPOS,
UFeats, Lemmas F1, here equal to accuracy since the words are the gold ones; the same
figures as the "gold tokens" columns of benchmarks/pipeline.py). Tagging speed is
measured as ``benchmarks/pipeline.py``'s ``tagger_speed`` does: in process, one core
(``NUMBA_NUM_THREADS=1``), the gold-tokenized blanked test file, 50 sentences to warm
up, best of three runs over the whole file (also by CPU time, steadier when other jobs
share the machine). Settings: ``greedy`` / ``viterbi`` /
``viterbi2`` force one decoding on every stage; ``auto`` (the default of
``arboreal train``) trains each stage both ways and keeps the better on dev.
Kernels are compiled (or loaded from numba's cache) before anything is timed.
Prints a markdown table (and JSON lines on stderr).

    python benchmarks/tagger_decoding.py [--treebanks UD_English-EWT ...]
        [--decodings greedy viterbi auto] [--json FILE]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from udpipe_baseline import UD, blank_tags, split_path  # noqa: E402

DEFAULT_TREEBANKS = ["UD_English-EWT", "UD_Greek-GDT", "UD_Turkish-IMST"]
METRICS = ("UPOS", "XPOS", "UFeats", "Lemmas")


def _blank(path: Path) -> list:
    from arboreal.io.conllu import read_conllu

    return read_conllu(io.StringIO(blank_tags(path)), allow_missing_heads=True,
                       check_trees=False)


def scores(tagger, gold_path: Path) -> dict[str, float]:
    from arboreal.evaluation_ud import evaluate_ud
    from arboreal.io.conllu import read_conllu

    result = evaluate_ud(read_conllu(gold_path), tagger.tag(_blank(gold_path)))
    return {m: 100.0 * result[m]["f1"] for m in METRICS}


def tagger_speed(tagger, test: Path, repeats: int = 3) -> tuple[float, float]:
    """Words per second of the tagger alone, as benchmarks/pipeline.py measures it (wall
    clock), and the same by the process's CPU time (steadier on a loaded machine)."""
    sentences = _blank(test)
    words = sum(len(s) for s in sentences)
    tagger.tag(sentences[:50])            # compile / warm up
    best = best_cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        tagger.tag(sentences)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return words / best, words / best_cpu


def warm_up(decodings: list[str]) -> None:
    """Compile (or load) every kernel the settings use, so no timing includes it."""
    from arboreal.io.conllu import read_conllu
    from arboreal.models.tagger import Tagger

    sample = read_conllu(ROOT / "data" / "sample" / "en_ewt-sample-train.conllu")[:40]
    for d in decodings:
        Tagger.train(sample[:30], sample[30:], epochs=1, decoding=d, bits=12).tag(sample)


def run(treebank: str, decoding: str) -> dict:
    from arboreal.io.conllu import read_conllu
    from arboreal.models.tagger import Tagger

    train_p, dev_p, test_p = (split_path(treebank, s) for s in ("train", "dev", "test"))
    train, dev = read_conllu(train_p), read_conllu(dev_p)
    t0 = time.perf_counter()
    tagger = Tagger.train(train, dev, decoding=decoding)
    train_s = time.perf_counter() - t0
    speed, speed_cpu = tagger_speed(tagger, test_p)
    return {"treebank": treebank, "decoding": decoding,
            "stages": {n: st.decoding for n, st in tagger.stages.items()},
            "epochs": {n: st.epochs for n, st in tagger.stages.items()},
            "stage_dev": tagger.meta["stages"],
            "dev": scores(tagger, dev_p), "test": scores(tagger, test_p),
            "train_s": train_s, "words_per_s": speed, "words_per_cpu_s": speed_cpu,
            "load": os.getloadavg()[0]}


def table(results: list[dict]) -> str:
    abbrev = {"greedy": "g", "viterbi": "v", "viterbi2": "v2"}
    lines = ["| treebank | decoding | stages (U/X/F/L) | dev UPOS | XPOS | UFeats | Lemmas "
             "| test UPOS | XPOS | UFeats | Lemmas | train s | words/s | words/CPU s |",
             "|---|---|---|" + "---:|" * 11]
    for r in results:
        st = "/".join(abbrev[d] for d in r["stages"].values())
        lines.append(f"| {r['treebank']} | {r['decoding']} | {st} | "
                     + " | ".join(f"{r['dev'][m]:.2f}" for m in METRICS) + " | "
                     + " | ".join(f"{r['test'][m]:.2f}" for m in METRICS)
                     + f" | {r['train_s']:.0f} | {r['words_per_s']:,.0f} "
                     f"| {r['words_per_cpu_s']:,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--treebanks", nargs="+", default=DEFAULT_TREEBANKS)
    ap.add_argument("--decodings", nargs="+", default=["greedy", "viterbi", "auto"],
                    choices=["greedy", "viterbi", "viterbi2", "auto"])
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="no measuring: the table of a run saved with --json")
    ap.add_argument("--write", action="store_true",
                    help="write the tagger_decoding section of docs/benchmarks.md")
    ap.add_argument("--note", default="", help="a line for the section (how it was run)")
    args = ap.parse_args(argv)
    if args.from_json is not None:
        results = json.loads(args.from_json.read_text())
    else:
        if not UD.exists():
            raise SystemExit(f"{UD} not found")
        warm_up(args.decodings)
        results = []
        for tb in args.treebanks:
            for d in args.decodings:
                r = run(tb, d)
                print(json.dumps(r), file=sys.stderr, flush=True)
                results.append(r)
                if args.json:
                    args.json.write_text(json.dumps(results, indent=1) + "\n")
    body = table(results)
    print(body)
    if args.write:
        from _report import write_section

        text = ("Stages U/X/F/L: the decoding each stage ended with (g greedy, v first-order "
                "Viterbi, v2 second-order); dev/test: F1 from gold tokenization with tags and "
                "lemmas blanked; train s: `Tagger.train` with dev, in process; words/s: "
                "tagging the test file, one core (wall and CPU time). `auto` is the default of "
                "`arboreal train --dev`: Viterbi replaces greedy for a stage only when better "
                "on dev by a one-sided sign test at 5%.\n\n" + body + "\n\n" + args.note)
        write_section("tagger_decoding", "Tagger: greedy vs Viterbi decoding (issue 14)",
                      "python benchmarks/tagger_decoding.py --json FILE", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
