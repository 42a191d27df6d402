"""Where a tagger's UPOS errors are: accuracy and share of the errors by how often each
test word (lower-cased, as the neural scorer looks words up) was seen in training, and
the most frequent confusions (gold tag, predicted tag).

Classes: seen at least ``--min-count`` times (the neural scorer's own word vectors;
default 2, its ``min_word_count``), seen fewer times (unknown to the network's word
table), unseen with a pretrained vector among the first ``--max-vectors`` of
``--vectors``, unseen without one. The system output must have the gold tokenization
(e.g. benchmarks/neural.py's ``TREEBANK.gold-tok.conllu``).

    python benchmarks/upos_errors.py --train TRAIN.conllu --gold TEST.conllu
        --system SYSTEM.conllu [--vectors VECTORS] [--max-vectors 100000] [--min-count 2]
        [--confusions 10]
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=Path, required=True)
    ap.add_argument("--gold", type=Path, required=True)
    ap.add_argument("--system", type=Path, required=True)
    ap.add_argument("--vectors", type=Path, default=None)
    ap.add_argument("--max-vectors", type=int, default=100_000)
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--confusions", type=int, default=10, help="how many confusions to list")
    args = ap.parse_args(argv)
    from arboreal.io.conllu import read_conllu

    counts = Counter(w.lower() for s in read_conllu(args.train) for w in s.forms[1:])
    vectors: set[str] = set()
    if args.vectors:
        from arboreal.neural.embeddings import read_embeddings

        vectors = set(read_embeddings(args.vectors, args.max_vectors)[0])
    gold = read_conllu(args.gold)
    system = read_conllu(args.system, allow_missing_heads=True, check_trees=False)
    if [len(s) for s in gold] != [len(s) for s in system]:
        raise SystemExit("the system output's words are not the gold ones")
    names = (f"seen >= {args.min_count} times", f"seen 1..{args.min_count - 1} times",
             "unseen, with a vector", "unseen, no vector")
    right, wrong, confusions = Counter(), Counter(), Counter()
    for g, p in zip(gold, system):
        for form, a, b in zip(g.forms[1:], g.upos[1:], p.upos[1:]):
            n = counts[form.lower()]
            kind = names[0] if n >= args.min_count else names[1] if n else \
                names[2] if form.lower() in vectors else names[3]
            (right if a == b else wrong)[kind] += 1
            if a != b:
                confusions[a, b] += 1
    errors = sum(wrong.values())
    print("| test words | words | UPOS right | share of the errors |")
    print("|---|---:|---:|---:|")
    for kind in names:
        n = right[kind] + wrong[kind]
        if n:
            print(f"| {kind} | {n:,} | {100 * right[kind] / n:.2f}% | "
                  f"{100 * wrong[kind] / max(errors, 1):.1f}% |")
    print(f"\n{errors:,} errors; the most frequent confusions:\n")
    print("| gold UPOS | predicted | errors | share of the errors |")
    print("|---|---|---:|---:|")
    for (a, b), n in confusions.most_common(args.confusions):
        print(f"| {a} | {b} | {n:,} | {100 * n / max(errors, 1):.1f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
