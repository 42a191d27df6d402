"""Epoch by epoch, side by side: the training history that model files hold (the arc
loss of training, dev LAS and dev UPOS of each epoch), and each model's kept epoch.

    python benchmarks/training_history.py MODEL [MODEL ...]

For comparing two trainings of benchmarks/neural.py (e.g. a variant against the
defaults); figures as the trainer recorded them, nothing is recomputed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from neural import parser_record  # noqa: E402

COLUMNS = (("loss_arc", "arc loss", "{:.4f}"), ("dev_las", "dev LAS", "{:.2f}"),
           ("dev_upos", "dev UPOS", "{:.2f}"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    args = ap.parse_args(argv)
    records = [parser_record(m) for m in args.models]
    for m, r in zip(args.models, records):
        if not r:
            raise SystemExit(f"{m}: no training history in this model file")
    print("| epoch | " + " | ".join(f"{label} ({k + 1})" for k in range(len(records))
                                     for _, label, _ in COLUMNS) + " |")
    print("|---:|" + "---:|" * (len(COLUMNS) * len(records)))
    longest = max(len(r["history"]) for r in records)
    for e in range(longest):
        cells = []
        for r in records:
            row = r["history"][e] if e < len(r["history"]) else {}
            cells += [fmt.format(row[key]) if row.get(key) is not None else ""
                      for key, _, fmt in COLUMNS]
        print(f"| {e + 1} | " + " | ".join(cells) + " |")
    for k, (m, r) in enumerate(zip(args.models, records)):
        print(f"\n({k + 1}) {m}: kept epoch {r['best_epoch']} of {len(r['history'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
