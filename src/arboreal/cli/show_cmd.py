"""``arboreal show``: draw the trees of a CoNLL-U file (or a model's parses and arc
marginals) as one SVG picture or a self-contained HTML page."""
from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Iterable, Iterator

from arboreal.errors import ArborealError

#: sentences one page holds unless --max-sentences says otherwise
DEFAULT_MAX_SENTENCES = 1000
#: sentences parsed (and given marginals) at a time with --model
_BATCH = 64


def add_parser(subparsers) -> None:
    from arboreal.io.svg import MAX_HEATMAP_WORDS, MAX_TREE_WORDS
    from arboreal.io.text import INPUT_FORMATS

    p = subparsers.add_parser(
        "show", help="draw dependency trees (and a model's arc marginals) as SVG or HTML",
        description="Draw the dependency trees of a CoNLL-U file: words in a row, arcs "
                    "above them from head to dependent with their DEPREL, crossing "
                    "(non-projective) arcs dashed in red. An .svg output holds one "
                    "sentence; an .html output (a self-contained page without scripts) "
                    "holds every selected sentence under its sent_id and text. With "
                    "--model, each sentence is parsed and drawn with a heat map of the "
                    "model's arc marginals P(head of m is h), its predicted tree outlined. "
                    f"Sentences over {MAX_TREE_WORDS} words cannot be drawn; heat maps are "
                    f"drawn for sentences of at most {MAX_HEATMAP_WORDS} words. The output "
                    "file is written atomically.")
    p.add_argument("input", metavar="INPUT", nargs="?", default="-",
                   help="CoNLL-U file (default: standard input; HEAD may be '_': such words "
                        "get no arc)")
    p.add_argument("-o", "--output", metavar="OUTPUT.html|OUTPUT.svg", default="-",
                   help="output file, written atomically; its extension (.html, .htm, .svg) "
                        "gives the format (default: HTML on standard output)")
    p.add_argument("--format", choices=("html", "svg"), default=None,
                   help="output format, when the output's extension does not tell it")
    p.add_argument("--sentences", metavar="SPEC", default=None,
                   help="sentences to draw, comma-separated: 1-based positions (7), ranges "
                        "(1-5) or sent_ids (a sent_id that looks like a number: id:7); "
                        "drawn in file order (default: all)")
    p.add_argument("--max-sentences", metavar="N", type=int, default=DEFAULT_MAX_SENTENCES,
                   help="refuse to put more than N sentences into one page (default: "
                        f"{DEFAULT_MAX_SENTENCES}; 0: no limit)")
    p.add_argument("--model", metavar="MODEL", default=None,
                   help="model file written by 'arboreal train' (or an installed or cached model's "
                        "name): draw its parse of each "
                        "sentence and a heat map of its arc marginals")
    p.add_argument("--input", dest="input_format", choices=("auto", *INPUT_FORMATS),
                   default="auto",
                   help="with --model: auto (default: CoNLL-U or raw text, told by the "
                        "lines), conllu, tokenized (one sentence per line, tokens separated "
                        "by spaces) or text (raw text, tokenized by the model)")
    p.add_argument("--retag", action="store_true",
                   help="with --model: predict UPOS, XPOS, FEATS and LEMMA even where the "
                        "input has them")
    p.set_defaults(func=run)


# ----------------------------------------------------------------------------
# --sentences

_POSITION = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")


class TooMany(Exception):
    """More sentences selected than the output may hold."""


class Selection:
    """A parsed --sentences SPEC: 1-based position ranges and sent_ids."""

    def __init__(self, spec: str | None):
        self.ranges: list[tuple[int, int]] = []
        self.ids: list[str] = []
        self.everything = spec is None
        if spec is None:
            return
        for item in spec.split(","):
            match = _POSITION.fullmatch(item)
            if match:
                a = int(match.group(1))
                b = int(match.group(2) or a)
                if a < 1 or b < a:
                    raise ArborealError(f"--sentences: {item.strip()!r} is not a range of "
                                        "sentence positions (they start at 1)")
                self.ranges.append((a, b))
                continue
            value = item.strip()
            if value.startswith("id:"):
                value = value[3:].strip()
            if not value:
                raise ArborealError(f"--sentences: empty item in {spec!r}")
            self.ids.append(value)
        self.wanted_ids = set(self.ids)
        self.last = max((b for _, b in self.ranges), default=0)

    def pick(self, sentences: Iterable, name: str, limit: int) -> list[tuple[int, object]]:
        """(1-based position, sentence) of the selected sentences, in file order; at
        most ``limit`` (0: any number; TooMany as soon as one more is selected).
        Stops reading once every position is found (no sent_ids asked for). O(sentences
        read * ranges)."""
        chosen: list[tuple[int, object]] = []
        seen_ids: set[str] = set()
        count = 0
        it: Iterator = iter(sentences)
        try:
            for count, s in enumerate(it, 1):
                take = self.everything or any(a <= count <= b for a, b in self.ranges)
                if self.ids:
                    sid = s.sent_id
                    if sid in self.wanted_ids:
                        seen_ids.add(sid)
                        take = True
                if take:
                    chosen.append((count, s))
                    if limit and len(chosen) > limit:
                        raise TooMany()
                if not self.everything and not self.ids and count >= self.last:
                    break
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
        if not self.everything:
            if count < self.last:
                raise ArborealError(f"--sentences: sentence {self.last} is past the end of "
                                    f"{name} ({count} sentence{'s' if count != 1 else ''})")
            missing = [i for i in self.ids if i not in seen_ids]
            if missing:
                raise ArborealError(f"--sentences: no sentence of {name} has sent_id "
                                    f"{missing[0]!r}")
        return chosen


# ----------------------------------------------------------------------------
# the command


def _output_format(args) -> str:
    if args.format:
        return args.format
    if args.output == "-":
        return "html"
    ext = os.path.splitext(args.output)[1].lower()
    if ext in (".html", ".htm"):
        return "html"
    if ext == ".svg":
        return "svg"
    raise ArborealError(f"{args.output}: cannot tell the output format from the extension "
                        f"{ext or '(none)'!r}: name it .html or .svg, or give --format")


def _marginal_pictures(model, args, chosen: list) -> tuple[list, list]:
    """Parsed copies of the chosen sentences and, for each, its heat map (an SVG, or a
    note when the sentence is too long for one)."""
    from arboreal.io.conllu import batched
    from arboreal.io.svg import MAX_HEATMAP_WORDS, marginals_svg
    from arboreal.models.pipeline import UntaggedInputError

    marginals_of = getattr(model, "arc_marginals", None)
    if marginals_of is None:
        raise ArborealError(f"{args.model}: this model cannot compute arc marginals")
    parsed: list = []
    maps: list = []
    name = "<stdin>" if args.input == "-" else args.input
    for batch in batched([s for _, s in chosen], _BATCH):
        try:
            trees = model.parse(batch, retag=args.retag)
            short = [i for i, s in enumerate(batch) if len(s) <= MAX_HEATMAP_WORDS]
            probs = marginals_of([batch[i] for i in short], retag=args.retag) if short else []
        except UntaggedInputError as exc:
            raise ArborealError(f"{name}: {exc}") from None
        if len(probs) != len(short):
            raise ArborealError(f"{args.model}: the model returned {len(probs)} marginal "
                                f"matrices for {len(short)} sentences")
        by_index = dict(zip(short, probs))
        for i, tree in enumerate(trees):
            parsed.append(tree)
            if i in by_index:
                maps.append(marginals_svg(tree.forms, by_index[i], heads=tree.heads,
                                          title="arc marginals"))
            else:
                maps.append(None)
    return parsed, maps


def _note_svg(text: str) -> str:
    from arboreal.io.svg import _FONT_FAMILY, _f, _text_width, escape

    width = _f(20 + _text_width(text, 12))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="30" '
            f'viewBox="0 0 {width} 30" class="arboreal-note" role="img">'
            f'<text x="10" y="19" font-size="12" fill="#888888" '
            f'font-family="{_FONT_FAMILY}">{escape(text)}</text></svg>')


def run(args: argparse.Namespace) -> int:
    from arboreal._atomic import atomic_write
    from arboreal.io.conllu import iter_conllu
    from arboreal.io.svg import (
        MAX_HEATMAP_WORDS, html_page, sentence_title, stack_svgs, tree_svg,
    )

    fmt = _output_format(args)
    if args.max_sentences < 0:
        raise ArborealError("--max-sentences must be 0 (no limit) or positive")
    selection = Selection(args.sentences)
    name = "<stdin>" if args.input == "-" else args.input
    limit = 1 if fmt == "svg" else args.max_sentences
    model = None
    if args.model is not None:
        from arboreal.cli.parse_cmd import input_sentences
        import arboreal

        model = arboreal.load(args.model)
        stream = input_sentences(model, args)
    else:
        if args.input_format not in ("auto", "conllu"):
            raise ArborealError(f"--input {args.input_format} needs --model (a file without "
                                "trees has nothing to draw)")
        if args.retag:
            raise ArborealError("--retag needs --model")
        from arboreal.cli.parse_cmd import resolve_input

        source, kind = resolve_input(args.input, args.input_format, None, None)
        if kind != "conllu":
            raise ArborealError(f"{name}: this is text, without trees to draw: give --model "
                                "MODEL to parse it")
        stream = iter_conllu(source, allow_missing_heads=True)
    try:
        chosen = selection.pick(stream, name, limit)
    except TooMany:
        what = "--sentences selects" if args.sentences is not None else f"{name} holds"
        if fmt == "svg":
            raise ArborealError(f"an SVG file holds one sentence, and {what} several: "
                                "choose one with --sentences, or write .html") from None
        raise ArborealError(f"{what} more than {limit} sentences, too many for one page: "
                            "choose some with --sentences, or raise the limit with "
                            "--max-sentences N (0: no limit)") from None

    if model is None:
        trees = [s for _, s in chosen]
        maps = [None] * len(trees)
    else:
        trees, maps = _marginal_pictures(model, args, chosen)
    titles = [sentence_title(s, pos) for (pos, _), s in zip(chosen, trees)]

    if fmt == "svg":
        tree, title = trees[0], titles[0]
        pictures = [tree_svg(tree, title=title)]
        if model is not None:
            pictures.append(maps[0] if maps[0] is not None else _note_svg(
                f"no heat map: more than {MAX_HEATMAP_WORDS} words"))
            text = stack_svgs(pictures)
        else:
            text = pictures[0]
    else:
        svgs: list[str] = []
        heads: list[str | None] = []
        for tree, title, heat in zip(trees, titles, maps):
            svgs.append(tree_svg(tree))
            heads.append(title)
            if model is not None:
                svgs.append(heat if heat is not None else _note_svg(
                    f"no heat map: more than {MAX_HEATMAP_WORDS} words"))
                heads.append(None)
        what = f"{name}: {len(trees)} sentence{'s' if len(trees) != 1 else ''}"
        if model is not None:
            what += f", parsed by {args.model}"
        text = html_page(svgs, heads, page_title=what)

    data = text.encode("utf-8")
    if args.output == "-":
        sys.stdout.flush()
        out = getattr(sys.stdout, "buffer", None)
        if out is not None:
            out.write(data)
            out.flush()
        else:
            sys.stdout.write(text)
    else:
        atomic_write(args.output, lambda f: f.write(data))
    return 0
