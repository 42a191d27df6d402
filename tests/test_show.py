"""arboreal.io.svg (tree pictures, arc-marginal heat maps, HTML pages) and ``arboreal show``."""
from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from arboreal.cli import main
from arboreal.errors import ArborealError
from arboreal.io.conllu import read_conllu
from arboreal.io.sentence import Sentence
from arboreal.io.svg import (
    MAX_HEATMAP_WORDS, MAX_TREE_WORDS, html_page, marginals_svg, probability_colours, stack_svgs, tree_svg,
)
from arboreal.trees import nonprojective_arcs

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample" / "en_ewt-sample-test.conllu"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def sample():
    return read_conllu(SAMPLE)


def classes(el) -> set[str]:
    return set(el.get("class", "").split())


def texts(root, cls: str) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text") if cls in classes(t)]


def deps(root) -> list:
    return [g for g in root.iter(f"{SVG}g") if "dep" in classes(g)]


def geometric_crossings(heads: np.ndarray) -> set[tuple[int, int]]:
    """Brute force: arcs (h, m) that cross another arc or pass over a root word."""
    arcs = [(int(h), m) for m, h in enumerate(heads) if m and h > 0]
    roots = [m for m, h in enumerate(heads) if m and h == 0]
    out = set()
    for (h1, m1), (h2, m2) in itertools.combinations(arcs, 2):
        a, b = sorted((h1, m1))
        c, d = sorted((h2, m2))
        if a < c < b < d or c < a < d < b:
            out |= {(h1, m1), (h2, m2)}
    for h, m in arcs:
        for r in roots:
            if min(h, m) < r < max(h, m):
                out |= {(h, m), (0, r)}
    return out


def arc_geometry(group) -> tuple[float, float, float]:
    """(x of the head's leg, x of the dependent's leg, y of the top) of a drawn arc."""
    d = next(p for p in group.iter(f"{SVG}path") if "arc" in classes(p)).get("d")
    numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", d)]
    if group.get("data-head") == "0":
        return numbers[0], numbers[0], numbers[1]
    return numbers[0], numbers[-3], numbers[4]


# ----------------------------------------------------------------------------
# trees


def test_tree_words_arcs_and_labels(sample):
    for s in sample[:40]:
        root = ET.fromstring(tree_svg(s))
        assert root.tag == f"{SVG}svg" and float(root.get("width")) > 0
        assert texts(root, "form") == list(s.forms[1:])
        assert texts(root, "upos") == list(s.upos[1:])
        groups = deps(root)
        assert len(groups) == len(s)                       # every word has a head here
        drawn = {(int(g.get("data-head")), int(g.get("data-dep"))) for g in groups}
        assert drawn == {(int(s.heads[m]), m) for m in range(1, len(s) + 1)}
        for g in groups:
            assert sum("arc" in classes(p) for p in g.iter(f"{SVG}path")) == 1
            m = int(g.get("data-dep"))
            assert texts(g, "deprel") == [s.deprels[m]]


def test_title_and_width_grow_with_text():
    short = tree_svg(Sentence.from_columns(["a", "b"], [2, 0], ["det", "root"]))
    long = tree_svg(Sentence.from_columns(["a" * 30, "b"], [2, 0], ["det", "root"]))
    wide = tree_svg(Sentence.from_columns(["\u6f22\u5b57" * 5, "b"], [2, 0], ["det", "root"]))
    narrow = tree_svg(Sentence.from_columns(["ab" * 5, "b"], [2, 0], ["det", "root"]))
    width = lambda svg: float(ET.fromstring(svg).get("width"))   # noqa: E731
    assert width(long) > width(short) + 100
    assert width(wide) > width(narrow)                 # CJK characters count double
    titled = ET.fromstring(tree_svg(Sentence.from_columns(["a"], [0]), title="s-1: a & b"))
    assert texts(titled, "title") == ["s-1: a & b"]


def test_text_widths_are_the_fonts_advances():
    from arboreal.io import svg

    regular, bold = svg._advances(False), svg._advances(True)
    printable = [chr(c) for c in range(0x20, 0x7F)]
    assert all(0.2 < regular[ch] < 1.1 and 0.2 < bold[ch] < 1.2 for ch in printable)
    assert bold["W"] > regular["W"]
    # the old guess, 0.62 em for every character, was far too narrow for W and M
    assert regular["W"] > regular["M"] > 0.8 > 0.62 > regular["a"] > regular["i"]
    assert svg._text_width("WWWWWWWWWWWW", 14) == pytest.approx(12 * 14 * regular["W"])
    assert svg._text_width("W", 13, bold=True) == pytest.approx(13 * bold["W"])
    # a combining mark and a zero-width format character take no room
    assert svg._text_width("e\u0301\u200b", 10) == pytest.approx(svg._text_width("e", 10))
    # a character neither font has: the fallback, as wide as an em
    missing = next(ch for ch in map(chr, range(0x0E01, 0x0E30)) if ch not in regular)
    assert svg._text_width(missing * 3, 10) == pytest.approx(30 * svg.FALLBACK_EM)


def test_wide_words_are_laid_out_apart():
    from arboreal.io import svg

    forms = ["WWWWWWWWWWWW", "MMMMMMMM", "i", "\u6f22\u5b57\u6f22\u5b57", "WWWWWWWWWWWW"]
    s = Sentence.from_columns(forms, [2, 0, 2, 2, 2], ["a", "root", "b", "c", "d"])
    root = ET.fromstring(tree_svg(s))
    words = [(float(e.get("x")), e.text) for e in root.iter(f"{SVG}text")
             if e.get("class") == "form"]
    assert [w for _, w in words] == forms
    for (x1, a), (x2, b) in zip(words, words[1:]):           # centred texts: half each
        assert x2 - x1 >= (svg._text_width(a, 14) + svg._text_width(b, 14)) / 2
    assert float(root.get("width")) >= words[-1][0] + svg._text_width(forms[-1], 14) / 2


def test_font_table_is_what_the_generator_makes(tmp_path):
    pytest.importorskip("fontTools", reason="fontTools regenerates the table (pip install fonttools)")
    fonts = {"regular": ["dejavu/DejaVuSans.ttf", "liberation2/LiberationSans-Regular.ttf"],
             "bold": ["dejavu/DejaVuSans-Bold.ttf", "liberation2/LiberationSans-Bold.ttf"]}
    paths = {k: [Path("/usr/share/fonts/truetype") / f for f in v] for k, v in fonts.items()}
    if not all(p.exists() for v in paths.values() for p in v):
        pytest.skip("the fonts are not installed (Debian: fonts-dejavu-core, fonts-liberation2)")
    out = tmp_path / "metrics.py"
    r = subprocess.run([sys.executable, str(REPO / "tools" / "svg_font_metrics.py"),
                        "--regular", *map(str, paths["regular"]), "--bold", *map(str, paths["bold"]),
                        "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    shipped = REPO / "src" / "arboreal" / "io" / "_font_metrics.py"
    assert out.read_text(encoding="utf-8") == shipped.read_text(encoding="utf-8")


def test_crossing_arcs_are_marked(sample):
    #        1   2   3   4   5 ; arcs 2->1, 2->5, 5->3 and 1->4, which spans the root word 2
    s = Sentence.from_columns(["w1", "w2", "w3", "w4", "w5"], [2, 0, 5, 1, 2],
                              ["a", "root", "b", "c", "d"])
    root = ET.fromstring(tree_svg(s))
    marked = {(int(g.get("data-head")), int(g.get("data-dep")))
              for g in deps(root) if "crossing" in classes(g)}
    assert marked == {(1, 4), (5, 3), (2, 5), (0, 2)}
    assert set(nonprojective_arcs(s.heads)) <= marked
    style = {}
    for g in deps(root):
        path = next(p for p in g.iter(f"{SVG}path") if "arc" in classes(p))
        style[int(g.get("data-dep"))] = (path.get("stroke"), path.get("stroke-dasharray"))
    assert style[4][1] and style[4][0] != style[1][0] and style[1][1] is None
    # crossing arcs come last in the document, drawn over the others
    order = [("crossing" in classes(g)) for g in deps(root)]
    assert order == sorted(order)

    nonproj = [t for t in sample if nonprojective_arcs(t.heads)]
    assert len(nonproj) >= 3
    for t in sample:
        root = ET.fromstring(tree_svg(t))
        marked = {(int(g.get("data-head")), int(g.get("data-dep")))
                  for g in deps(root) if "crossing" in classes(g)}
        assert marked == geometric_crossings(t.heads)
        assert set(nonprojective_arcs(t.heads)) <= marked


def test_arc_heights_separate_nested_and_crossing_arcs(sample):
    trees = [t for t in sample if len(t) <= 40][:60]
    trees.append(Sentence.from_columns(list("abcde"), [2, 0, 5, 1, 2]))
    for t in trees:
        root = ET.fromstring(tree_svg(t))
        arcs = []
        legs = []
        for g in deps(root):
            h, m = int(g.get("data-head")), int(g.get("data-dep"))
            xh, xm, top = arc_geometry(g)
            legs += [xh, xm] if h else [xm]
            if h:
                arcs.append((min(h, m), max(h, m), top))
        assert len(set(legs)) == len(legs)            # no two arc ends on one line
        for (a, b, y1), (c, d, y2) in itertools.combinations(arcs, 2):
            if max(a, c) < min(b, d):                 # they share a gap between words
                assert y1 != y2
                if a <= c and d <= b:
                    assert y1 < y2                    # the outer arc is higher
                elif c <= a and b <= d:
                    assert y2 < y1


def test_escaping_and_odd_characters():
    s = Sentence.from_columns(['<b>', 'A&B', '"q"', "it's", "x\x01y"], [0, 1, 1, 1, 1],
                              ["root", "a&b", "<dep>", "'", "c"],
                              upos=["<X>", "&", "NOUN", "VERB", "X"])
    svg = tree_svg(s, title='<t> & "t"')
    assert "<b>" not in svg and "<X>" not in svg and "<dep>" not in svg
    root = ET.fromstring(svg)                          # well-formed XML
    assert texts(root, "form") == ['<b>', 'A&B', '"q"', "it's", "x\ufffdy"]
    assert texts(root, "upos") == ["<X>", "&", "NOUN", "VERB", "X"]
    assert sorted(texts(root, "deprel")) == sorted(["root", "a&b", "<dep>", "'", "c"])
    assert texts(root, "title") == ['<t> & "t"']


def test_empty_missing_heads_and_bad_trees():
    empty = ET.fromstring(tree_svg(Sentence.from_columns([])))
    assert float(empty.get("width")) > 0 and float(empty.get("height")) > 0
    assert deps(empty) == [] and texts(empty, "form") == []

    s = Sentence.from_columns(["a", "b", "c"], [2, 0, -1], ["x", "root", "_"])
    root = ET.fromstring(tree_svg(s))
    assert {int(g.get("data-dep")) for g in deps(root)} == {1, 2}
    assert texts(root, "form") == ["a", "b", "c"]

    unlabeled = ET.fromstring(tree_svg(Sentence.from_columns(["a", "b"], [2, 0])))
    assert texts(unlabeled, "deprel") == ["root"]      # only the root arrow is named

    with pytest.raises(ArborealError, match="head 2"):
        tree_svg(Sentence.from_columns(["a", "b"], [0, 2]))
    with pytest.raises(ArborealError, match="head 5"):
        tree_svg(Sentence.from_columns(["a", "b"], [0, 5]))
    many = MAX_TREE_WORDS + 1
    with pytest.raises(ArborealError, match="at most"):
        tree_svg(Sentence.from_columns(["w"] * many, [0] + list(range(1, many))))


def test_long_sentence_gets_wide_not_refused():
    n = 300
    s = Sentence.from_columns([f"w{i}" for i in range(n)], [0] + list(range(1, n)))
    root = ET.fromstring(tree_svg(s))
    assert len(deps(root)) == n and float(root.get("width")) > 20 * n


# ----------------------------------------------------------------------------
# heat maps


def luminance(colour: str) -> float:
    r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def random_marginals(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = rng.random((n + 1, n + 1)) ** 3
    p[:, 0] = 0
    p[np.arange(n + 1), np.arange(n + 1)] = 0
    p[:, 1:] /= p[:, 1:].sum(axis=0)
    return p


def test_heat_map_cells_colours_and_outline():
    forms = ["Birds", "sing", "<&>"]
    n = len(forms)
    p = random_marginals(n)
    heads = np.array([-1, 2, 0, 2])
    root = ET.fromstring(marginals_svg(forms, p, heads=heads, title="m"))
    cells = [r for r in root.iter(f"{SVG}rect") if "cell" in classes(r)]
    assert len(cells) == (n + 1) * n
    seen = {(int(c.get("data-h")), int(c.get("data-m"))) for c in cells}
    assert seen == {(h, m) for h in range(n + 1) for m in range(1, n + 1)}
    for c in cells:
        assert float(c.get("data-p")) == pytest.approx(p[int(c.get("data-h")),
                                                         int(c.get("data-m"))], abs=1e-4)
    # colour intensity monotone in probability, white at 0
    pairs = sorted((float(c.get("data-p")), luminance(c.get("fill"))) for c in cells)
    for (p1, l1), (p2, l2) in zip(pairs, pairs[1:]):
        assert l2 <= l1
        if p2 - p1 >= 0.01:
            assert l2 < l1
    assert all(c.get("fill") == "#ffffff" for c in cells if float(c.get("data-p")) == 0)
    # probabilities written in the cells above 0.05
    assert sorted(texts(root, "prob")) == sorted(f"{v:.2f}" for v in p[:, 1:].ravel()
                                                 if v >= 0.05)
    outlined = {(int(r.get("data-h")), int(r.get("data-m")))
                for r in root.iter(f"{SVG}rect") if "predicted" in classes(r)}
    assert outlined == {(2, 1), (0, 2), (2, 3)}
    assert texts(root, "row-label") == ["ROOT", "1 Birds", "2 sing", "3 <&>"]
    cols = [t for t in root.iter(f"{SVG}text") if "col-label" in classes(t)]
    assert ["".join(t.itertext()) for t in cols] == ["1 Birds", "2 sing", "3 <&>"]
    assert all("rotate(" in t.get("transform") for t in cols)
    assert sum("legend" in classes(r) for r in root.iter(f"{SVG}rect")) >= 10


def test_colour_scale_is_perceptually_monotone():
    ps = np.linspace(0, 1, 101)
    lum = [luminance(c) for c in probability_colours(ps)]
    assert all(b < a for a, b in zip(lum, lum[1:]))
    assert probability_colours(0.0) == "#ffffff"
    assert probability_colours(np.zeros((2, 3))).shape == (2, 3)


def test_heat_map_validation():
    p = random_marginals(3)
    sentence_forms = np.array(["<root>", "a", "b", "c"], dtype=object)
    assert ET.fromstring(marginals_svg(sentence_forms, p)) is not None   # root entry accepted
    with pytest.raises(ArborealError, match="shape"):
        marginals_svg(["a", "b"], p)
    with pytest.raises(ArborealError, match="square"):
        marginals_svg(["a", "b", "c"], p[:, :3])
    with pytest.raises(ArborealError, match="square"):
        marginals_svg(["a"], np.zeros(2))
    bad = p.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ArborealError, match="NaN"):
        marginals_svg(["a", "b", "c"], bad)
    bad[1, 2] = 1.5
    with pytest.raises(ArborealError, match="probabilities"):
        marginals_svg(["a", "b", "c"], bad)
    with pytest.raises(ArborealError, match="heads"):
        marginals_svg(["a", "b", "c"], p, heads=np.array([-1, 0, 1]))
    with pytest.raises(ArborealError, match="numeric"):
        marginals_svg(["a"], [["x", "y"], ["z", "w"]])
    big = MAX_HEATMAP_WORDS + 1
    with pytest.raises(ArborealError, match="at most"):
        marginals_svg(["w"] * big, np.zeros((big + 1, big + 1)))
    empty = ET.fromstring(marginals_svg([], np.zeros((1, 1))))
    assert [r for r in empty.iter(f"{SVG}rect") if "cell" in classes(r)] == []


# ----------------------------------------------------------------------------
# containers


def test_html_page_is_self_contained(sample):
    svgs = [tree_svg(sample[0]), marginals_svg(["a", "b"], random_marginals(2)),
            tree_svg(sample[1])]
    page = html_page(svgs, ["s1 <one> & \"x\"", None, "s2"], page_title="t & t")
    assert page.startswith("<!DOCTYPE html>")
    root = ET.fromstring(page.split("\n", 1)[1])       # polyglot: also well-formed XML
    assert root.tag == "html"
    assert [h.text for h in root.iter("h2")] == ['s1 <one> & "x"', "s2"]
    sections = list(root.iter("section"))
    assert [len(list(s.iter(f"{SVG}svg"))) for s in sections] == [2, 1]
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert not re.search(r"""(src|href)\s*=""", page) and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    with pytest.raises(ValueError):
        html_page(svgs, ["one"])


def test_stack_svgs(sample):
    a, b = tree_svg(sample[0]), marginals_svg(["a"], np.array([[0.0, 1.0], [0.0, 0.0]]))
    root = ET.fromstring(stack_svgs([a, b]))
    inner = list(root.findall(f"{SVG}svg"))
    assert [classes(s) for s in inner] == [{"arboreal-tree"}, {"arboreal-marginals"}]
    h0 = float(inner[0].get("height"))
    assert float(inner[1].get("y")) >= h0
    assert float(root.get("height")) >= h0 + float(inner[1].get("height"))


# ----------------------------------------------------------------------------
# the command line


def one_line_error(capsys, *words: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("arboreal: error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err
    return err


def test_cli_svg_and_html(tmp_path, sample):
    out = tmp_path / "one.svg"
    assert main(["show", str(SAMPLE), "-o", str(out), "--sentences", "31"]) == 0
    root = ET.fromstring(out.read_text(encoding="utf-8"))
    assert texts(root, "form") == list(sample[30].forms[1:])
    assert any("crossing" in classes(g) for g in deps(root))   # sentence 31 is non-projective
    assert texts(root, "title") == [f"{sample[30].sent_id}: " + next(
        c.split("=", 1)[1].strip() for c in sample[30].comments if c.startswith("# text"))]

    page = tmp_path / "p.html"
    sid = sample[9].sent_id
    assert main(["show", str(SAMPLE), "-o", str(page), "--sentences", f"2-4,{sid},1"]) == 0
    root = ET.fromstring(page.read_text(encoding="utf-8").split("\n", 1)[1])
    heads = [h.text for h in root.iter("h2")]
    assert [h.split(":")[0] for h in heads] == [sample[i].sent_id for i in (0, 1, 2, 3, 9)]
    trees = [s for s in root.iter(f"{SVG}svg") if "arboreal-tree" in classes(s)]
    assert [texts(t, "form") for t in trees] == [list(sample[i].forms[1:])
                                                 for i in (0, 1, 2, 3, 9)]
    assert sorted(os.listdir(tmp_path)) == ["one.svg", "p.html"]   # no temporary files

    assert main(["show", str(SAMPLE), "-o", str(page)]) == 0      # default: everything
    assert page.read_text(encoding="utf-8").count("<svg ") == len(sample)


def test_cli_stdout(capsys):
    assert main(["show", str(SAMPLE), "--sentences", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!DOCTYPE html>") and out.count("<svg ") == 1
    assert main(["show", str(SAMPLE), "--sentences", "1", "--format", "svg"]) == 0
    assert ET.fromstring(capsys.readouterr().out).tag == f"{SVG}svg"


@pytest.mark.parametrize("argv, words", [
    (["--sentences", "201"], ["past the end", "200 sentences"]),
    (["--sentences", "0"], ["--sentences", "'0'"]),
    (["--sentences", "5-2"], ["--sentences"]),
    (["--sentences", "1,,2"], ["empty item"]),
    (["--sentences", "no-such-id"], ["sent_id 'no-such-id'"]),
    (["--max-sentences", "5"], ["more than 5 sentences", "--max-sentences"]),
    (["--max-sentences", "-1"], ["--max-sentences"]),
    (["--input", "tokenized"], ["needs --model"]),
    (["--retag"], ["needs --model"]),
])
def test_cli_selection_errors(tmp_path, capsys, argv, words):
    out = tmp_path / "out.html"
    assert main(["show", str(SAMPLE), "-o", str(out), *argv]) == 2
    one_line_error(capsys, *words)
    assert os.listdir(tmp_path) == []


def test_cli_file_errors_leave_no_output(tmp_path, capsys):
    svg = tmp_path / "out.svg"
    svg.write_text("old")
    assert main(["show", str(SAMPLE), "-o", str(svg)]) == 2          # several sentences
    one_line_error(capsys, "SVG file holds one sentence")
    assert main(["show", str(SAMPLE), "-o", str(svg), "--sentences", "1-2"]) == 2
    one_line_error(capsys, "--sentences selects several")
    assert svg.read_text() == "old"

    assert main(["show", str(tmp_path / "missing.conllu"), "-o", str(tmp_path / "a.html")]) == 2
    one_line_error(capsys, "missing.conllu")

    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tBirds\tbird\tNOUN\tNNS\t_\t7\tnsubj\t_\t_\n"
                   "2\tsing\tsing\tVERB\tVBP\t_\t0\troot\t_\t_\n\n")
    assert main(["show", str(bad), "-o", str(tmp_path / "b.html")]) == 2
    one_line_error(capsys, "bad.conllu:1")
    bad.write_text("not conllu at all\n\n")
    assert main(["show", str(bad), "-o", str(tmp_path / "b.html")]) == 2
    one_line_error(capsys, "bad.conllu")

    assert main(["show", str(SAMPLE), "-o", str(tmp_path / "x.png")]) == 2
    one_line_error(capsys, "--format")
    assert sorted(os.listdir(tmp_path)) == ["bad.conllu", "out.svg"]


def test_cli_error_in_a_real_process(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "arboreal", "show", str(SAMPLE), "-o",
                        str(tmp_path / "o.html"), "--sentences", "1,999"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("arboreal: error: --sentences: sentence 999")
    assert r.stderr.count("\n") == 1 and os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------
# --model, with a stand-in model (parse + arc_marginals, the contract of Parser)


class FakeModel:
    """Each word heads the next one; marginals uniform over the other words and the root."""

    tokenizer = None

    def __init__(self, with_marginals: bool = True):
        self.calls = 0
        if not with_marginals:
            self.arc_marginals = None

    def parse(self, sentences, retag: bool = False):
        out = []
        for s in sentences:
            n = len(s)
            heads = np.arange(-1, n, dtype=np.int32)
            rels = np.array(["<root>"] + ["root"] + ["next"] * (n - 1), dtype=object)
            out.append(s.with_tree(heads, rels[: n + 1]))
        return out

    def arc_marginals(self, sentences, retag: bool = False):
        self.calls += 1
        out = []
        for s in sentences:
            n = len(s)
            p = np.full((n + 1, n + 1), 1.0 / max(n, 1))
            p[:, 0] = 0
            p[np.arange(n + 1), np.arange(n + 1)] = 0
            out.append(p)
        return out


@pytest.fixture
def fake_model(monkeypatch):
    import arboreal

    model = FakeModel()
    monkeypatch.setattr(arboreal, "load", lambda path: model)
    return model


def test_cli_model_heat_maps(tmp_path, sample, fake_model):
    page = tmp_path / "m.html"
    assert main(["show", "--model", "fake.npz", str(SAMPLE), "-o", str(page),
                 "--sentences", "1-3"]) == 0
    text = page.read_text(encoding="utf-8")
    assert "parsed by fake.npz" in text
    root = ET.fromstring(text.split("\n", 1)[1])
    sections = list(root.iter("section"))
    assert len(sections) == 3
    for s, sec in zip(sample[:3], sections):
        kinds = [classes(x) for x in sec.iter(f"{SVG}svg")]
        assert kinds == [{"arboreal-tree"}, {"arboreal-marginals"}]
        tree, heat = sec.iter(f"{SVG}svg")
        n = len(s)
        drawn = {(int(g.get("data-head")), int(g.get("data-dep"))) for g in deps(tree)}
        assert drawn == {(m - 1, m) for m in range(1, n + 1)}           # the model's parse
        cells = [r for r in heat.iter(f"{SVG}rect") if "cell" in classes(r)]
        assert len(cells) == (n + 1) * n
        outlined = {(int(r.get("data-h")), int(r.get("data-m")))
                    for r in heat.iter(f"{SVG}rect") if "predicted" in classes(r)}
        assert outlined == drawn
    assert fake_model.calls == 1                                        # one batch

    one = tmp_path / "m.svg"
    assert main(["show", "--model", "fake.npz", str(SAMPLE), "-o", str(one),
                 "--sentences", "2"]) == 0
    root = ET.fromstring(one.read_text(encoding="utf-8"))
    assert [classes(s) for s in root.findall(f"{SVG}svg")] == [{"arboreal-tree"},
                                                               {"arboreal-marginals"}]


def test_cli_model_tokenized_input(tmp_path, fake_model):
    src = tmp_path / "in.txt"
    src.write_text("Birds sing .\nA & B <c>\n", encoding="utf-8")
    page = tmp_path / "t.html"
    assert main(["show", "--model", "m", "--input", "tokenized", str(src), "-o", str(page)]) == 0
    root = ET.fromstring(page.read_text(encoding="utf-8").split("\n", 1)[1])
    trees = [s for s in root.iter(f"{SVG}svg") if "arboreal-tree" in classes(s)]
    assert [texts(t, "form") for t in trees] == [["Birds", "sing", "."], ["A", "&", "B", "<c>"]]
    assert [h.text for h in root.iter("h2")] == ["1: Birds sing .", "2: A & B <c>"]


def test_cli_model_long_sentence_gets_a_note(tmp_path, fake_model):
    src = tmp_path / "in.txt"
    src.write_text("a b c\n" + " ".join(["w"] * (MAX_HEATMAP_WORDS + 1)) + "\n")
    page = tmp_path / "t.html"
    assert main(["show", "--model", "m", "--input", "tokenized", str(src), "-o", str(page)]) == 0
    root = ET.fromstring(page.read_text(encoding="utf-8").split("\n", 1)[1])
    kinds = [classes(s) for sec in root.iter("section") for s in sec.findall(f".//{SVG}svg")]
    assert kinds == [{"arboreal-tree"}, {"arboreal-marginals"}, {"arboreal-tree"},
                     {"arboreal-note"}]
    assert "no heat map" in page.read_text(encoding="utf-8")


def test_cli_model_without_marginals(tmp_path, capsys, monkeypatch):
    import arboreal

    monkeypatch.setattr(arboreal, "load", lambda path: FakeModel(False))
    assert main(["show", "--model", "m.npz", str(SAMPLE), "-o", str(tmp_path / "x.html"),
                 "--sentences", "1"]) == 2
    one_line_error(capsys, "m.npz", "arc marginals")
    assert os.listdir(tmp_path) == []


def test_cli_bad_model_file(tmp_path, capsys):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a model")
    assert main(["show", "--model", str(junk), str(SAMPLE), "-o", str(tmp_path / "x.html")]) == 2
    one_line_error(capsys, "junk.npz")
    assert os.listdir(tmp_path) == ["junk.npz"]


@pytest.mark.slow
def test_cli_real_model(tmp_path, sample):
    from arboreal.io.conllu import write_conllu

    train = tmp_path / "train.conllu"
    write_conllu(read_conllu(REPO / "data" / "sample" / "en_ewt-sample-train.conllu")[:40], train)
    model = tmp_path / "m.npz"
    assert main(["train", str(train), "-o", str(model), "--epochs", "1", "--hash-bits", "16",
                 "--quiet"]) == 0
    page = tmp_path / "r.html"
    assert main(["show", "--model", str(model), str(SAMPLE), "-o", str(page),
                 "--sentences", "1-3"]) == 0
    root = ET.fromstring(page.read_text(encoding="utf-8").split("\n", 1)[1])
    sections = list(root.iter("section"))
    assert len(sections) == 3
    for s, sec in zip(sample[:3], sections):
        tree, heat = sec.iter(f"{SVG}svg")
        assert texts(tree, "form") == list(s.forms[1:])
        drawn = {(int(g.get("data-head")), int(g.get("data-dep"))) for g in deps(tree)}
        assert {m for _, m in drawn} == set(range(1, len(s) + 1))
        cells = [r for r in heat.iter(f"{SVG}rect") if "cell" in classes(r)]
        assert len(cells) == (len(s) + 1) * len(s)
        columns: dict[int, float] = {}
        for c in cells:
            m = int(c.get("data-m"))
            columns[m] = columns.get(m, 0.0) + float(c.get("data-p"))
        assert all(abs(v - 1) < 1e-2 for v in columns.values())
        outlined = {(int(r.get("data-h")), int(r.get("data-m")))
                    for r in heat.iter(f"{SVG}rect") if "predicted" in classes(r)}
        assert outlined == drawn
