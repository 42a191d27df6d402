"""``arboreal stats FILE...``: size, projectivity, roots and inventories of treebanks."""
from __future__ import annotations

import argparse
import json
import textwrap
from collections import Counter

import numpy as np


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "stats",
        help="treebank statistics: sizes, non-projectivity, roots, label and POS inventories",
        description=(
            "For each FILE: sentences, words, multiword tokens, empty nodes, maximum and mean "
            "sentence length, % non-projective sentences and arcs, sentences with several "
            "words attached to the root, and the DEPREL and UPOS inventories with counts. "
            "Tree figures cover the sentences whose heads are all given."
        ),
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="CoNLL-U file(s) ('-' for standard input)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object mapping each FILE to its statistics")
    p.set_defaults(func=run)


def corpus_stats(sentences) -> dict:
    """Statistics of a list of sentences (see ``arboreal stats --help``)."""
    from arboreal.trees import tree_properties

    lengths = np.fromiter(map(len, sentences), np.int64, len(sentences))
    parsed = [s for s in sentences if s.has_heads]
    props = tree_properties([s.heads for s in parsed])
    parsed_words = int(sum(len(s) for s in parsed))
    nonproj = props["nonprojective"]
    mwt = sum(1 for s in sentences for _, line in s.extra if "-" in line.split("\t", 1)[0])
    empty = sum(1 for s in sentences for _, line in s.extra if "." in line.split("\t", 1)[0])
    deprels = Counter(np.concatenate([s.deprels[1:] for s in sentences]).tolist())
    upos = Counter(np.concatenate([s.upos[1:] for s in sentences]).tolist())
    pct = lambda k, t: round(100.0 * k / t, 2) if t else 0.0  # noqa: E731
    return {
        "sentences": len(sentences),
        "words": int(lengths.sum()),
        "multiword_tokens": mwt,
        "empty_nodes": empty,
        "max_length": int(lengths.max(initial=0)),
        "mean_length": round(float(lengths.mean()), 2) if len(lengths) else 0.0,
        "parsed_sentences": len(parsed),
        "nonprojective_sentences": int((nonproj > 0).sum()),
        "nonprojective_sentences_pct": pct(int((nonproj > 0).sum()), len(parsed)),
        "nonprojective_arcs": int(nonproj[nonproj > 0].sum()),
        "nonprojective_arcs_pct": pct(int(nonproj[nonproj > 0].sum()), parsed_words),
        "multi_root_sentences": int((props["roots"] > 1).sum()),
        "deprels": dict(deprels.most_common()),
        "upos": dict(upos.most_common()),
    }


def format_stats(name: str, st: dict) -> str:
    def inventory(title: str, counts: dict) -> str:
        body = ", ".join(f"{k} {v}" for k, v in counts.items())
        return textwrap.fill(f"{title} ({len(counts)}): {body}", width=100,
                             initial_indent="  ", subsequent_indent="    ")

    rows = [
        ("sentences", f"{st['sentences']}"),
        ("words", f"{st['words']}"),
        ("multiword tokens", f"{st['multiword_tokens']}"),
        ("empty nodes", f"{st['empty_nodes']}"),
        ("max sentence length", f"{st['max_length']}"),
        ("mean sentence length", f"{st['mean_length']:.2f}"),
        ("non-projective sentences", f"{st['nonprojective_sentences_pct']:.2f} % ({st['nonprojective_sentences']})"),
        ("non-projective arcs", f"{st['nonprojective_arcs_pct']:.2f} % ({st['nonprojective_arcs']})"),
        ("sentences with several roots", f"{st['multi_root_sentences']}"),
    ]
    if st["parsed_sentences"] != st["sentences"]:
        rows.append(("sentences with all heads", f"{st['parsed_sentences']}"))
    width = max(len(r[0]) for r in rows)
    lines = [name] + [f"  {k:<{width}}  {v}" for k, v in rows]
    lines.append(inventory("relations", st["deprels"]))
    lines.append(inventory("UPOS", st["upos"]))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from arboreal.io.conllu import read_conllu

    results = {}
    for path in args.files:
        results[path] = corpus_stats(read_conllu(path, allow_missing_heads=True))
    if args.json:
        print(json.dumps(results))
    else:
        print("\n\n".join(format_stats(p, st) for p, st in results.items()))
    return 0
