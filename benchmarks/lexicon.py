"""Building a lexicon (``arboreal lexicon``) on 10M tokens: time and memory (issue 19).

Runs ``python -m arboreal lexicon CORPUS -o OUT --quiet`` with its default settings under
``/usr/bin/time -v`` after a warm-up run on a small file (so numba's kernels come from
the cache), and records wall and CPU seconds, the peak resident memory of the whole
command and what the lexicon holds. The corpus is the 10M-token prefix that
benchmarks/clusters.py cuts from the unlabeled corpus of benchmarks/unlabeled_corpus.py
(``runs/clusters/en-10M.txt``; one sentence per line, tokenized).

    python benchmarks/lexicon.py [--corpus runs/clusters/en-10M.txt]
        [--out runs/lexicon/en-10M.lex.npz] [--no-write]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import write_section  # noqa: E402


def timed(cmd: list[str]) -> dict:
    """Wall and CPU seconds and peak RSS (MiB) of ``cmd`` under /usr/bin/time -v."""
    proc = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    err = proc.stderr

    def field(name: str) -> str:
        return re.search(rf"{re.escape(name)}: (.+)", err).group(1).strip()

    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    parts = [float(x) for x in wall.split(":")]
    seconds = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    return {"wall": seconds,
            "cpu": float(field("User time (seconds)")) + float(field("System time (seconds)")),
            "rss_mib": int(field("Maximum resident set size (kbytes)")) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT / "runs" / "clusters" / "en-10M.txt")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "lexicon" / "en-10M.lex.npz")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    warm = args.out.parent / "warmup.txt"
    warm.write_text("the cat sat on the mat\nthe dog sat on the cat\n" * 20)
    base = [sys.executable, "-m", "arboreal", "lexicon", "--quiet"]
    timed(base + [str(warm), "-o", str(args.out.parent / "warmup.npz")])
    load = os.getloadavg()[0]
    run = timed(base + [str(args.corpus), "-o", str(args.out)])

    from arboreal.features.lexicon import Lexicon

    lex = Lexicon.load(args.out)
    size = args.out.stat().st_size / 2**20
    tokens = lex.tokens
    body = (
        f"Corpus: `{args.corpus.relative_to(ROOT) if args.corpus.is_relative_to(ROOT) else args.corpus}` "
        f"({tokens:,} tokens, {lex.sentences:,} lines), "
        f"the 10M-token prefix of the unlabeled English corpus of benchmarks/unlabeled_corpus.py "
        "cut by benchmarks/clusters.py. Command: `python -m arboreal lexicon CORPUS -o OUT "
        f"--quiet` (its defaults: window {lex.window}, minimum word count {lex.min_count}, "
        f"minimum pair count {lex.min_pair_count}, {lex.n_neighbours} neighbours for each of "
        f"the {lex.similar_words:,} most frequent words), after a warm-up run; times and peak "
        "memory of the whole command from `/usr/bin/time -v`; 1-minute load average at the "
        f"start: {load:.1f} (above 1, other jobs shared the 2 cores: the wall time is "
        "inflated, the CPU time is the steadier cost).\n\n"
        "| tokens | wall s | CPU s | peak RSS MiB | tokens per CPU s | words kept | pairs kept | "
        "words with neighbours | file MiB |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"| {tokens:,} | {run['wall']:.0f} | {run['cpu']:.0f} | {run['rss_mib']:.0f} | "
        f"{tokens / run['cpu']:,.0f} | {len(lex):,} | {lex.pair_keys.size:,} | "
        f"{lex.nb_indptr.size - 1:,} | {size:.1f} |\n")
    print(body)
    if not args.no_write:
        cmd = "python benchmarks/lexicon.py"
        write_section("lexicon", "Lexicon from unlabeled text: time and memory on 10M tokens",
                      cmd, body)


if __name__ == "__main__":
    main()
