"""Feature-set variants of the first-order parser, compared on EWT dev only.

Trains ``Parser.train`` on EWT train with a template list and prints the dev UAS after
every epoch and the best one; the test split is never read (feature sets are chosen on
dev). Variants:

* ``default``: the current default feature set (80 templates);
* ``before``: the default set before session 4 (72 templates: ``default`` without the
  eight below);
* ``before+ctx2``, ``before+lexctx``, ``before+both``: that set with the POS 4-grams
  reaching two words away, the words next to head and modifier, or both, appended after
  the bias template (``before+both`` holds the same templates as ``default`` in
  another order, hence other hash seeds);
* ``default+dup``: ``default`` with the eight templates a second time.

    python benchmarks/feature_variants.py VARIANT [--learner perceptron] [--seed 0]
        [--bits 23]

Prints only; the figures quoted in ``arboreal.features.first_order.default_templates``
came from this command.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UD = ROOT.parent / "shared" / "data" / "ud" / "UD_English-EWT"

CTX2 = ["h-2.pos h-1.pos h.pos m.pos", "h.pos m.pos m+1.pos m+2.pos",
        "h.pos h+1.pos h+2.pos m.pos", "h.pos m-2.pos m-1.pos m.pos"]
LEXCTX = ["h.pos m.pos m+1.word", "h.pos m.pos m-1.word",
          "h.pos h+1.word m.pos", "h.pos h-1.word m.pos"]


def variants() -> dict[str, list[str]]:
    from arboreal.features.first_order import default_templates

    default = default_templates()
    before = [t for t in default if t not in CTX2 + LEXCTX]
    return {"default": default, "before": before,
            "before+ctx2": before + CTX2, "before+lexctx": before + LEXCTX,
            "before+both": before + CTX2 + LEXCTX, "default+dup": default + CTX2 + LEXCTX}


def main(argv=None) -> int:
    table = variants()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variant", choices=sorted(table))
    ap.add_argument("--learner", default="perceptron")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bits", type=int, default=23, help="hash bits (default 23)")
    ap.add_argument("--epochs", type=int, default=10)
    args = ap.parse_args(argv)
    if not (UD / "en_ewt-ud-train.conllu").exists():
        print(f"EWT not found at {UD}", file=sys.stderr)
        return 1
    from arboreal.io.conllu import read_conllu
    from arboreal.models.parser import Parser

    train = read_conllu(UD / "en_ewt-ud-train.conllu")
    dev = read_conllu(UD / "en_ewt-ud-dev.conllu")
    t0 = time.process_time()
    parser = Parser.train(train, dev, learner=args.learner, features=table[args.variant],
                          hash_bits=args.bits, epochs=args.epochs, seed=args.seed)
    history = parser.meta["history"]
    for h in history:
        print(f"epoch {h['epoch']:2d}  dev UAS {h['dev_uas']:.2f}  LAS {h['dev_las']:.2f}")
    best = max(history, key=lambda h: h["dev_uas"])
    print(f"{args.variant} ({len(table[args.variant])} templates, 2^{args.bits}, "
          f"{args.learner}, seed {args.seed}): best dev UAS {best['dev_uas']:.2f} at epoch "
          f"{best['epoch']}; {time.process_time() - t0:.0f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
