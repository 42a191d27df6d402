"""Parsing a large input: words/s and peak memory of `arboreal parse` on all of EWT.

EWT test alone (25k words) is parsed in about as long as the command takes to start
(interpreter, numpy/numba imports, model load; see the first_order section). This
script parses EWT train + dev + test concatenated (254k words, ten times more) with
models trained by benchmarks/first_order.py, as one whole command each, in
``--rounds`` round-robin rounds (the fastest run of each model counts), and reports
words/s and peak RSS: the throughput a user parsing a corpus sees, and that memory
stays bounded (the input is streamed in batches). Writes the ``parse_throughput``
section of docs/benchmarks.md.

    python benchmarks/parse_throughput.py --models-dir DIR [--models NAME ...] [--rounds 3]
        [--no-write]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from first_order import UD, count_words, timed  # noqa: E402

DEFAULT_MODELS = ["mcdonald-eisner-perceptron", "mcdonald-cle-perceptron",
                  "default-eisner-perceptron", "default-cle-mira"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", type=Path, required=True,
                    help="folder with NAME.npz models (benchmarks/first_order.py --results-dir "
                         "DIR keeps them in DIR/models)")
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if not UD.exists():
        print(f"EWT not found at {UD}", file=sys.stderr)
        return 1
    models = {name: args.models_dir / f"{name}.npz" for name in args.models}
    missing = [str(p) for p in models.values() if not p.exists()]
    if missing:
        print("missing models: " + ", ".join(missing), file=sys.stderr)
        return 1
    exe = [sys.executable, "-m", "arboreal"]
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "ewt-all.conllu"
        with open(big, "w", encoding="utf-8") as out:
            for split in ("train", "dev", "test"):
                out.write((UD / f"en_ewt-ud-{split}.conllu").read_text(encoding="utf-8"))
        words = count_words(big)
        runs: dict[str, list] = {name: [] for name in models}
        for _ in range(args.rounds):
            for name, model in models.items():
                runs[name].append(timed(exe + ["parse", str(model), str(big), "-o",
                                               str(Path(tmp) / "out.conllu")]))
    rows = ["| model | words/s (whole command, fastest) | wall s | CPU s | peak RSS MiB |",
            "|---|---:|---:|---:|---:|"]
    for name in models:
        best = min(runs[name], key=lambda r: r["wall"])
        rows.append(f"| {name} | {words / best['wall']:.0f} | {best['wall']:.2f} | "
                    f"{best['cpu']:.2f} | {best['rss_mib']:.0f} |")
        print(rows[-1], flush=True)
    body = (f"Input: EWT train + dev + test in one file ({words:,} words), gold UPOS; the "
            "whole `arboreal parse` command (start-up and model load included, numba's "
            f"cache warm), fastest of {args.rounds} round-robin rounds. Models: those of "
            "the first_order section.\n\n" + "\n".join(rows) + "\n")
    print(body)
    if not args.no_write:
        from _report import write_section

        write_section("parse_throughput", "Parsing a large input (all of EWT)",
                      "python benchmarks/parse_throughput.py --models-dir DIR --models "
                      + " ".join(args.models) + f" --rounds {args.rounds}", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
