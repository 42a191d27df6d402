"""How fast `arboreal parse` answers Ctrl-C (SIGINT) and SIGTERM on a long sentence.

    python benchmarks/signal_latency.py --workdir DIR [--orders 1 2 3] [--words 2000]
        [--after 2 5 8] [--src SRC]

Uses the models and long sentences that benchmarks/long_sentences.py left in DIR
(``orderK.model``, ``longN.conllu``). For each order, signal and delay: starts the
whole command with ``-o DIR/out.conllu``, sends the signal that many seconds later,
and reports the seconds until the process ended (after one warm-up parse of the
shortest long sentence per order), its exit status, and whether a
temporary file was left in DIR. A run that ends before the signal is reported as
such. ``--src`` runs the package in SRC (another checkout's ``src``) instead.
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from long_sentences import arboreal  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--words", type=int, default=2000)
    ap.add_argument("--after", type=float, nargs="+", default=[2.0, 5.0, 8.0])
    ap.add_argument("--src", type=Path, default=None)
    args = ap.parse_args()

    work = args.workdir
    sentence = work / f"long{args.words}.conllu"
    print(f"{args.words} words, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
          + (f", package from {args.src}" if args.src else "") + "\n")
    print("| order | signal | sent after (s) | ended after the signal (s) | exit | temp file left |")
    print("| --- | --- | --- | --- | --- | --- |")
    for order in args.orders:
        warm = sorted(work.glob("long*.conllu"), key=lambda p: p.stat().st_size)[0]
        subprocess.run(arboreal("parse", str(work / f"order{order}.model"), str(warm), "-o",
                                str(work / "out.conllu"), src=args.src),
                       check=True, capture_output=True)       # numba's cache, warm
        for sig in (signal.SIGINT, signal.SIGTERM):
            for after in args.after:
                out = work / "out.conllu"
                proc = subprocess.Popen(arboreal("parse", str(work / f"order{order}.model"),
                                                 str(sentence), "-o", str(out), src=args.src),
                                        stderr=subprocess.DEVNULL)
                time.sleep(after)
                if proc.poll() is not None:
                    print(f"| {order} | {sig.name} | {after:g} | (finished before) | "
                          f"{proc.returncode} | |")
                    continue
                t = time.perf_counter()
                proc.send_signal(sig)
                proc.wait()
                waited = time.perf_counter() - t
                left = sorted(p.name for p in work.iterdir() if p.name.endswith(".tmp"))
                for p in left:
                    (work / p).unlink()
                print(f"| {order} | {sig.name} | {after:g} | {waited:.2f} | {proc.returncode} | "
                      f"{'yes' if left else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
