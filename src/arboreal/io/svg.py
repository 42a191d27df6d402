"""Pictures of dependency trees and of arc marginals: standalone SVG, pure Python.

- :func:`tree_svg`: one tree, words in a row, arcs drawn above the words from head to
  dependent (arrowhead at the dependent, DEPREL on the arc), the root's arc a vertical
  arrow from above. Arcs that cross another arc (or a root arrow) -- the arcs that make
  a tree non-projective, and those they cross -- are drawn dashed in red, on top.
- :func:`marginals_svg`: a heat map of an arc-marginal matrix ``P[h, m]``, rows the
  heads (ROOT, then the words), columns the dependents, optionally outlining a tree.
- :func:`html_page`: several SVGs in one self-contained HTML page (no script, no
  external resource).
- :func:`stack_svgs`: several SVGs stacked vertically in one SVG.

Text widths are estimated per character (no font metrics): 0.62 em for most
characters, 1 em for East Asian wide and full-width ones, 0 for combining marks. Every
text is XML-escaped; characters that XML 1.0 cannot hold become U+FFFD. No ``id``
attributes are used, so any number of pictures can share an HTML page.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Sequence

import numpy as np

from arboreal.errors import ArborealError

__all__ = ["tree_svg", "marginals_svg", "html_page", "stack_svgs", "sentence_title", "escape",
           "probability_colours", "MAX_TREE_WORDS", "MAX_HEATMAP_WORDS"]

#: longest sentence :func:`tree_svg` draws (its picture would be ~100,000 px wide)
MAX_TREE_WORDS = 1000
#: longest sentence :func:`marginals_svg` draws ((n+1) * n cells: 40,200 at the limit,
#: about 5 MB of SVG)
MAX_HEATMAP_WORDS = 200
#: longest sentence whose heat-map cells get a tooltip (a <title>) each
_TOOLTIP_WORDS = 60

_FONT_FAMILY = "DejaVu Sans, Noto Sans, Liberation Sans, Arial, sans-serif"
_WORD_SIZE = 14       # FORM
_TAG_SIZE = 11        # UPOS
_LABEL_SIZE = 11      # DEPREL
_LEVEL = 20           # vertical distance between arc levels (px)
_SLOT = 7             # horizontal distance between arc ends at one word (px)
_MARGIN = 10
_ARC_COLOUR = "#555555"
_LABEL_COLOUR = "#333333"
_CROSS_COLOUR = "#d62728"
_TAG_COLOUR = "#888888"
_OUTLINE_COLOUR = "#e6550d"

# characters XML 1.0 cannot hold (C0 controls but tab/LF/CR, surrogates, U+FFFE/F)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                          "'": "&#39;"})


def escape(text: object) -> str:
    """``text`` as XML character data or attribute value: ``& < > " '`` escaped, the
    characters XML 1.0 forbids replaced by U+FFFD. O(len)."""
    return _NOT_XML.sub("\ufffd", str(text)).translate(_ESCAPES)


def _text_width(text: str, size: float) -> float:
    """Estimated width in px of ``text`` in a sans-serif font of ``size`` px."""
    em = 0.0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        em += 1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.62
    return em * size


def _f(x: float) -> str:
    """A coordinate with at most one decimal."""
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


def _svg_open(width: float, height: float, kind: str, label: str) -> list[str]:
    w, h = _f(width), _f(height)
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" font-family="{_FONT_FAMILY}" class="{kind}" role="img">',
            f"<title>{escape(label)}</title>",
            f'<rect class="background" x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>']


# ----------------------------------------------------------------------------
# dependency trees


def _crossings(lo: np.ndarray, hi: np.ndarray, roots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(arc crosses something (k,), root arrow crosses something (r,)) for arcs spanning
    ``lo[i] < hi[i]`` and vertical root arrows at the positions ``roots``. Two arcs cross
    when exactly one end of one lies strictly inside the other; a root arrow at p crosses
    an arc with lo < p < hi. O(k^2 + k r) vectorized."""
    a_lo, a_hi = lo[:, None], hi[:, None]
    cross = (a_lo < lo[None, :]) & (lo[None, :] < a_hi) & (a_hi < hi[None, :])
    over_root = (lo[:, None] < roots[None, :]) & (roots[None, :] < hi[:, None])
    arc_cross = cross.any(axis=1) | cross.any(axis=0) | over_root.any(axis=1)
    return arc_cross, over_root.any(axis=0)


def _levels(lo: np.ndarray, hi: np.ndarray, n: int) -> np.ndarray:
    """Height level (>= 1) of each arc: arcs are placed shortest first, each one level
    above every arc placed before it with which it shares a gap between two words. So a
    nested arc is strictly higher than the arcs inside it and two crossing arcs never
    share a level (their horizontal parts never overlap). O(k * mean arc length)."""
    level = np.zeros(len(lo), dtype=np.int64)
    gaps = np.zeros(n + 1, dtype=np.int64)     # gap g lies between words g and g+1
    for i in np.lexsort((lo, hi - lo)):
        a, b = lo[i], hi[i]
        level[i] = gaps[a:b].max() + 1
        gaps[a:b] = level[i]
    return level


def tree_svg(sentence, *, title: str | None = None) -> str:
    """One dependency tree as a standalone SVG document (a str; no XML declaration, UTF-8
    when written).

    ``sentence``: a :class:`~arboreal.io.sentence.Sentence` (arrays of shape (n+1,),
    index 0 the root): FORM and UPOS of the words in a row, one arc per word with a
    head (``heads[m] >= 1``) drawn above the words from head to dependent, arrowhead at
    the dependent, DEPREL on its top; a word on the root (``heads[m] == 0``) gets a
    vertical arrow from above labelled with its DEPREL (``root`` when ``_``); a word
    with head -1 (unknown) gets nothing. Arcs crossing another arc or a root arrow are
    dashed red and drawn last. Each arc is a ``<g class="dep">`` (``"dep crossing"``
    when it crosses; ``"dep root"`` for root arrows) with ``data-head``/``data-dep``,
    holding one ``<path class="arc">``, an arrowhead and the label ``<text>``.
    ``title``: a line of text above the tree.

    ArborealError when the sentence has more than :data:`MAX_TREE_WORDS` words or a head
    out of range or on itself. Time O(n * mean arc length + k^2) for k arcs (numpy for
    the k^2 crossing test); the picture's width grows linearly with the text.
    """
    forms = [str(x) for x in sentence.forms[1:]]
    n = len(forms)
    if n > MAX_TREE_WORDS:
        raise ArborealError(f"cannot draw a sentence of {n} words (at most {MAX_TREE_WORDS})")
    upos = [str(x) for x in sentence.upos[1:]]
    deprels = [str(x) for x in sentence.deprels[1:]]
    heads = np.asarray(sentence.heads, dtype=np.int64)
    if heads.shape != (n + 1,):
        raise ArborealError(f"heads has shape {heads.shape}, expected ({n + 1},)")
    words = np.arange(n + 1)
    bad = np.flatnonzero((heads[1:] < -1) | (heads[1:] > n) | (heads[1:] == words[1:])) + 1
    if len(bad):
        m = int(bad[0])
        raise ArborealError(f"word {m} ({forms[m - 1]!r}) has head {int(heads[m])}: "
                            f"not a word of this {n}-word sentence or itself")
    label = title if title is not None else " ".join(forms)
    if n == 0:
        width = max(160.0, _text_width(title or "", 13) + 2 * _MARGIN)
        out = _svg_open(width, 56 if title else 36, "arboreal-tree", label)
        y = 20
        if title:
            out.append(f'<text class="title" x="{_MARGIN}" y="{y}" font-size="13" '
                       f'font-weight="bold" fill="#222222">{escape(title)}</text>')
            y += 22
        out.append(f'<text class="empty" x="{_MARGIN}" y="{y}" font-size="12" '
                   f'fill="{_TAG_COLOUR}">(no words)</text>')
        out.append("</svg>")
        return "\n".join(out)

    # arcs: non-root ones as (lo, hi) spans, root arrows as positions
    deps = np.flatnonzero(heads[1:] >= 1) + 1
    hd = heads[deps]
    lo, hi = np.minimum(hd, deps), np.maximum(hd, deps)
    roots = np.flatnonzero(heads[1:] == 0) + 1
    arc_cross, root_cross = _crossings(lo, hi, roots)
    level = _levels(lo, hi, n) if len(deps) else np.zeros(0, np.int64)
    top_level = int(level.max()) if len(level) else 0

    def label_of(m: int, root: bool = False) -> str:
        d = deprels[m - 1]
        return ("root" if root else "") if d == "_" else d

    # arc ends at each word, left to right: arcs going left (shortest first), the root
    # arrow, arcs going right (longest first); then a nested arc's legs are never crossed
    # by the horizontal part of an arc it contains
    ends: list[list[tuple[int, int]]] = [[] for _ in range(n + 1)]  # (sort key, arc id)
    for i, (h, m) in enumerate(zip(hd.tolist(), deps.tolist())):
        length = abs(h - m)
        ends[min(h, m)].append((2 * n + 1 - length, i))   # going right from its left end
        ends[max(h, m)].append((length, i))               # going left from its right end
    for m in roots.tolist():
        ends[m].append((n, -1))        # keys: left 1..n-1, root n, right n+2..2n

    # word columns: wide enough for FORM, UPOS and the arc ends; an arc's label fits
    # between its legs (extra space is added before its right word when needed)
    widths = [max(_text_width(forms[i], _WORD_SIZE), _text_width(upos[i], _TAG_SIZE),
                  len(ends[i + 1]) * _SLOT) + 16 for i in range(n)]
    need = [[] for _ in range(n + 1)]   # need[r]: (l, label width) of arcs ending at r
    for h, m in zip(hd.tolist(), deps.tolist()):
        need[max(h, m)].append((min(h, m), _text_width(label_of(m), _LABEL_SIZE) + 10))
    centre = np.zeros(n + 1)
    left = float(_MARGIN)
    for i in range(1, n + 1):
        c = left + widths[i - 1] / 2
        for j, w in need[i]:
            c = max(c, centre[j] + w)
        centre[i] = c
        left = c + widths[i - 1] / 2
    width = left + _MARGIN
    if title:
        width = max(width, _text_width(title, 13) + 2 * _MARGIN)

    x_end: dict[tuple[int, int], float] = {}        # (arc id, word) -> x of its leg
    for w in range(1, n + 1):
        ordered = sorted(ends[w])
        k = len(ordered)
        for j, (_, i) in enumerate(ordered):
            x_end[(i, w)] = centre[w] + (j - (k - 1) / 2) * _SLOT

    y = _MARGIN
    title_line = None
    if title:
        title_line = y + 13
        y += 22
    root_label_y = y + 12
    y_base = root_label_y + 8 + (top_level + 1) * _LEVEL      # arcs end here, words below
    word_y = y_base + 18
    tag_y = word_y + 16
    height = tag_y + _MARGIN

    out = _svg_open(width, height, "arboreal-tree", label)
    if title_line is not None:
        out.append(f'<text class="title" x="{_MARGIN}" y="{_f(title_line)}" font-size="13" '
                   f'font-weight="bold" fill="#222222">{escape(title)}</text>')
    for i in range(n):
        x = _f(centre[i + 1])
        out.append(f'<text class="form" x="{x}" y="{_f(word_y)}" font-size="{_WORD_SIZE}" '
                   f'text-anchor="middle" fill="#111111">{escape(forms[i])}</text>')
        out.append(f'<text class="upos" x="{x}" y="{_f(tag_y)}" font-size="{_TAG_SIZE}" '
                   f'text-anchor="middle" fill="{_TAG_COLOUR}">{escape(upos[i])}</text>')

    def arrowhead(x: float, colour: str) -> str:
        return (f'<polygon class="arrowhead" points="{_f(x - 3.5)},{_f(y_base - 7)} '
                f'{_f(x + 3.5)},{_f(y_base - 7)} {_f(x)},{_f(y_base)}" fill="{colour}"/>')

    groups: list[tuple[bool, str]] = []
    for i, (h, m) in enumerate(zip(hd.tolist(), deps.tolist())):
        crossing = bool(arc_cross[i])
        colour = _CROSS_COLOUR if crossing else _ARC_COLOUR
        xh, xd = x_end[(i, h)], x_end[(i, m)]
        top = y_base - int(level[i]) * _LEVEL
        r = min(6.0, abs(xd - xh) / 2)
        s = 1 if xd > xh else -1
        d = (f"M{_f(xh)},{_f(y_base)} V{_f(top + r)} Q{_f(xh)},{_f(top)} {_f(xh + s * r)},"
             f"{_f(top)} H{_f(xd - s * r)} Q{_f(xd)},{_f(top)} {_f(xd)},{_f(top + r)} "
             f"V{_f(y_base - 6)}")
        dash = ' stroke-dasharray="5,3"' if crossing else ""
        text = label_of(m)
        parts = [f'<g class="dep{" crossing" if crossing else ""}" data-head="{h}" '
                 f'data-dep="{m}">',
                 f"<title>{escape(text)}({escape(forms[h - 1])} \u2192 "
                 f"{escape(forms[m - 1])})</title>",
                 f'<path class="arc" d="{d}" fill="none" stroke="{colour}" '
                 f'stroke-width="{1.6 if crossing else 1.3}"{dash}/>',
                 arrowhead(xd, colour)]
        if text:
            parts.append(f'<text class="deprel" x="{_f((xh + xd) / 2)}" y="{_f(top - 3)}" '
                         f'font-size="{_LABEL_SIZE}" text-anchor="middle" fill="'
                         f'{_CROSS_COLOUR if crossing else _LABEL_COLOUR}" stroke="#ffffff" '
                         f'stroke-width="3" paint-order="stroke">{escape(text)}</text>')
        parts.append("</g>")
        groups.append((crossing, "\n".join(parts)))
    arrow_top = root_label_y + 4
    for j, m in enumerate(roots.tolist()):
        crossing = bool(root_cross[j])
        colour = _CROSS_COLOUR if crossing else _ARC_COLOUR
        x = x_end[(-1, m)]
        dash = ' stroke-dasharray="5,3"' if crossing else ""
        text = label_of(m, root=True)
        groups.append((crossing, "\n".join([
            f'<g class="dep root{" crossing" if crossing else ""}" data-head="0" '
            f'data-dep="{m}">',
            f"<title>{escape(text)}(ROOT \u2192 {escape(forms[m - 1])})</title>",
            f'<path class="arc" d="M{_f(x)},{_f(arrow_top)} V{_f(y_base - 6)}" fill="none" '
            f'stroke="{colour}" stroke-width="{1.6 if crossing else 1.3}"{dash}/>',
            arrowhead(x, colour),
            f'<text class="deprel" x="{_f(x)}" y="{_f(root_label_y)}" '
            f'font-size="{_LABEL_SIZE}" text-anchor="middle" fill="'
            f'{_CROSS_COLOUR if crossing else _LABEL_COLOUR}">{escape(text)}</text>',
            "</g>"])))
    # crossing arcs last: on top of the others, never hidden
    out.extend(g for crossing, g in groups if not crossing)
    out.extend(g for crossing, g in groups if crossing)
    out.append("</svg>")
    return "\n".join(out)


# ----------------------------------------------------------------------------
# arc-marginal heat maps

def _srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of sRGB colours in [0, 1], shape (..., 3)."""
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    m = np.array([[0.4124564, 0.3575761, 0.1804375],
                  [0.2126729, 0.7151522, 0.0721750],
                  [0.0193339, 0.1191920, 0.9503041]])
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]),
                     200 * (f[..., 1] - f[..., 2])], axis=-1)


def _lab_to_srgb(lab: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1] (clipped) of CIELAB (D65) colours, shape (..., 3)."""
    fy = (lab[..., 0] + 16) / 116
    f = np.stack([fy + lab[..., 1] / 500, fy, fy - lab[..., 2] / 200], axis=-1)
    xyz = np.where(f > 6 / 29, f ** 3, 3 * (6 / 29) ** 2 * (f - 4 / 29))
    xyz = xyz * np.array([0.95047, 1.0, 1.08883])
    m = np.array([[3.2404542, -1.5371385, -0.4985314],
                  [-0.9692660, 1.8760108, 0.0415560],
                  [0.0556434, -0.2040259, 1.0572252]])
    lin = np.clip(xyz @ m.T, 0.0, 1.0)
    return np.where(lin <= 0.0031308, 12.92 * lin, 1.055 * lin ** (1 / 2.4) - 0.055)


#: ColorBrewer "Blues" (9 classes), its lightest class replaced by pure white
_BLUES = np.array([[0xff, 0xff, 0xff], [0xde, 0xeb, 0xf7], [0xc6, 0xdb, 0xef],
                   [0x9e, 0xca, 0xe1], [0x6b, 0xae, 0xd6], [0x42, 0x92, 0xc6],
                   [0x21, 0x71, 0xb5], [0x08, 0x51, 0x9c], [0x08, 0x30, 0x6b]]) / 255.0
_BLUES_LAB = _srgb_to_lab(_BLUES)


def _scale(p: np.ndarray) -> np.ndarray:
    """#rrggbb of each probability in ``p`` (1-D), Blues interpolated in CIELAB."""
    pos = p * (len(_BLUES_LAB) - 1)
    k = np.minimum(pos.astype(np.int64), len(_BLUES_LAB) - 2)
    t = (pos - k)[:, None]
    lab = _BLUES_LAB[k] * (1 - t) + _BLUES_LAB[k + 1] * t
    rgb = np.rint(_lab_to_srgb(lab) * 255).astype(np.int64)
    return np.array([f"#{r:02x}{g:02x}{b:02x}" for r, g, b in rgb.tolist()], dtype=object)


#: the colour of each percent 0..100 (a 1% step lowers CIELAB lightness by 0.3 to 1.3,
#: well above the 8-bit rounding, so the table is strictly monotone)
_TABLE = _scale(np.linspace(0.0, 1.0, 101))


def probability_colours(p) -> np.ndarray:
    """``#rrggbb`` strings (object array, the shape of ``p``) for probabilities in
    [0, 1] (clipped, rounded to whole percents): ColorBrewer's single-hue "Blues" scale
    from white (0) to dark blue (1), interpolated piecewise linearly in CIELAB. Its
    lightness falls strictly from one percent to the next, so perceived intensity is
    monotone in the probability. O(size)."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    return _TABLE[np.rint(p * 100).astype(np.int64)]


def _check_marginals(forms: Sequence[str], marginals, heads) -> tuple[list[str], np.ndarray,
                                                                     np.ndarray | None]:
    try:
        p = np.array(marginals, dtype=np.float64)
    except (TypeError, ValueError):
        raise ArborealError("marginals must be a numeric matrix") from None
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ArborealError(f"marginals must be a square (n+1, n+1) matrix, not shape "
                            f"{p.shape}")
    size = p.shape[0]
    words = [str(x) for x in forms]
    if len(words) == size:          # forms with the root entry, like Sentence.forms
        words = words[1:]
    if len(words) + 1 != size:
        raise ArborealError(f"marginals have shape {p.shape} but the sentence has "
                            f"{len(words)} words: expected ({len(words) + 1}, "
                            f"{len(words) + 1})")
    n = len(words)
    if n > MAX_HEATMAP_WORDS:
        raise ArborealError(f"cannot draw the marginals of a sentence of {n} words "
                            f"(at most {MAX_HEATMAP_WORDS})")
    if not np.isfinite(p).all():
        raise ArborealError("marginals contain NaN or infinite values")
    if p.size and (p.min() < -1e-6 or p.max() > 1 + 1e-6):
        raise ArborealError(f"marginals must be probabilities in [0, 1] (found values in "
                            f"[{p.min():.3g}, {p.max():.3g}])")
    p = np.clip(p, 0.0, 1.0)
    h = None
    if heads is not None:
        h = np.asarray(heads)
        if h.shape != (n + 1,) or not np.issubdtype(h.dtype, np.integer):
            raise ArborealError(f"heads must be an integer array of shape ({n + 1},), not "
                                f"{h.dtype} {h.shape}")
        if n and ((h[1:] < -1) | (h[1:] > n)).any():
            raise ArborealError("heads has a value out of range")
        h = h.astype(np.int64)
    return words, p, h


def marginals_svg(forms: Sequence[str], marginals, *, heads=None,
                  title: str | None = None) -> str:
    """A heat map of an arc-marginal matrix as a standalone SVG document (a str).

    ``forms``: the n words (or n+1 entries with the root first, like
    ``Sentence.forms``); ``marginals``: float array (n+1, n+1), ``marginals[h, m]`` =
    P(head of word m is h), h = 0 the root; column 0 is not drawn. Rows are the heads
    (ROOT, then the words), columns the dependents 1..n: (n+1) * n cells
    (``<rect class="cell" data-h data-m data-p>``) coloured by
    :func:`probability_colours` (white = 0), the probability written (two decimals) in
    cells of at least 0.05 (each cell has a tooltip up to 60 words). ``heads``: optional int array (n+1,) (a tree; -1 = none):
    the cell (heads[m], m) of each word is outlined (``<rect class="predicted">``).
    Word labels (position and FORM) on both axes, the column labels rotated; a colour
    legend below.

    ArborealError when the shape does not match the words, values are not
    probabilities (tolerance 1e-6; NaN), ``heads`` is malformed, or n exceeds
    :data:`MAX_HEATMAP_WORDS`. Time and output size O(n^2).
    """
    words, p, h = _check_marginals(forms, marginals, heads)
    n = len(words)
    cell = 30
    row_labels = ["ROOT"] + [f"{i} {w}" for i, w in enumerate(words, 1)]
    col_labels = row_labels[1:]
    row_w = max(_text_width(s, 11) for s in row_labels) + 10
    col_w = max((_text_width(s, 11) for s in col_labels), default=0.0)
    sin, cos = np.sin(np.pi / 3), np.cos(np.pi / 3)     # column labels at 60 degrees

    y = _MARGIN
    title_line = None
    if title:
        title_line = y + 13
        y += 22
    caption_y = y + 12
    y0 = caption_y + 10 + col_w * sin + 6
    x0 = _MARGIN + row_w
    grid_bottom = y0 + (n + 1) * cell
    legend_y = grid_bottom + 24
    steps = 20
    legend_w = steps * 12
    height = legend_y + 14 + 16 + _MARGIN
    width = max(x0 + n * cell + col_w * cos + _MARGIN, _MARGIN + legend_w + 200,
                _text_width(title or "", 13) + 2 * _MARGIN,
                _MARGIN + _text_width("heads (rows) \u2192 dependents (columns)", 11) + 10)

    label = title if title is not None else "arc marginals: " + " ".join(words)
    out = _svg_open(width, height, "arboreal-marginals", label)
    if title_line is not None:
        out.append(f'<text class="title" x="{_MARGIN}" y="{_f(title_line)}" font-size="13" '
                   f'font-weight="bold" fill="#222222">{escape(title)}</text>')
    out.append(f'<text class="caption" x="{_MARGIN}" y="{_f(caption_y)}" font-size="11" '
               f'fill="#555555">heads (rows) \u2192 dependents (columns)</text>')
    for i, s in enumerate(col_labels):
        x, yy = x0 + i * cell + cell / 2, y0 - 6
        out.append(f'<text class="col-label" x="{_f(x)}" y="{_f(yy)}" font-size="11" '
                   f'transform="rotate(-60 {_f(x)} {_f(yy)})" fill="#222222">'
                   f"{escape(s)}</text>")
    for r, s in enumerate(row_labels):
        out.append(f'<text class="row-label" x="{_f(x0 - 6)}" y="{_f(y0 + r * cell + 19)}" '
                   f'font-size="11" text-anchor="end" fill="#222222"'
                   f'{" font-style=" + chr(34) + "italic" + chr(34) if r == 0 else ""}>'
                   f"{escape(s)}</text>")
    colours = probability_colours(p)
    texts = []
    out.append('<g class="cells" stroke="#e6e6e6" stroke-width="0.5">')
    for r in range(n + 1):
        for m in range(1, n + 1):
            v = float(p[r, m])
            x, yy = x0 + (m - 1) * cell, y0 + r * cell
            rect = (f'<rect class="cell" data-h="{r}" data-m="{m}" data-p="{v:.4f}" '
                    f'x="{x}" y="{_f(yy)}" width="{cell}" height="{cell}" '
                    f'fill="{colours[r, m]}"')
            if n <= _TOOLTIP_WORDS:
                tip = (f"P(head of {m} {words[m - 1]} = "
                       f"{'ROOT' if r == 0 else f'{r} {words[r - 1]}'}) = {v:.4f}")
                out.append(f"{rect}><title>{escape(tip)}</title></rect>")
            else:
                out.append(f"{rect}/>")
            if v >= 0.05:
                ink = "#ffffff" if v > 0.5 else "#222222"
                texts.append(f'<text class="prob" x="{x + cell / 2}" y="{_f(yy + 19)}" '
                             f'font-size="10" text-anchor="middle" fill="{ink}">'
                             f"{v:.2f}</text>")
    out.append("</g>")
    out.extend(texts)
    if h is not None:
        for m in range(1, n + 1):
            if h[m] >= 0:
                x, yy = x0 + (m - 1) * cell + 1.5, y0 + int(h[m]) * cell + 1.5
                out.append(f'<rect class="predicted" data-h="{int(h[m])}" data-m="{m}" '
                           f'x="{_f(x)}" y="{_f(yy)}" width="{cell - 3}" height="{cell - 3}" '
                           f'fill="none" stroke="{_OUTLINE_COLOUR}" stroke-width="2.5"/>')
    # legend: the scale in 20 steps, ticks at 0, 0.5, 1
    steps_p = (np.arange(steps) + 0.5) / steps
    for i, c in enumerate(probability_colours(steps_p).tolist()):
        out.append(f'<rect class="legend" x="{_MARGIN + i * 12}" y="{_f(legend_y)}" '
                   f'width="12" height="14" fill="{c}" stroke="{c}" stroke-width="0.5"/>')
    out.append(f'<rect x="{_MARGIN}" y="{_f(legend_y)}" width="{legend_w}" height="14" '
               f'fill="none" stroke="#999999" stroke-width="0.5"/>')
    for v in (0.0, 0.5, 1.0):
        out.append(f'<text class="legend-tick" x="{_f(_MARGIN + v * legend_w)}" '
                   f'y="{_f(legend_y + 27)}" font-size="10" text-anchor="middle" '
                   f'fill="#444444">{v:g}</text>')
    out.append(f'<text class="legend-caption" x="{_MARGIN + legend_w + 10}" '
               f'y="{_f(legend_y + 11)}" font-size="11" fill="#444444">P(head)</text>')
    if h is not None:
        lx = _MARGIN + legend_w + 70
        out.append(f'<rect x="{lx}" y="{_f(legend_y)}" width="14" height="14" fill="none" '
                   f'stroke="{_OUTLINE_COLOUR}" stroke-width="2.5"/>')
        out.append(f'<text class="legend-caption" x="{lx + 20}" y="{_f(legend_y + 11)}" '
                   f'font-size="11" fill="#444444">predicted tree</text>')
    out.append("</svg>")
    return "\n".join(out)


# ----------------------------------------------------------------------------
# containers

_SIZE = re.compile(r'<svg\b[^>]*?\swidth="([0-9.]+)"[^>]*?\sheight="([0-9.]+)"')


def _size(svg: str) -> tuple[float, float]:
    match = _SIZE.match(svg.lstrip())
    if not match:
        raise ValueError("not an SVG document written by arboreal.io.svg")
    return float(match.group(1)), float(match.group(2))


def stack_svgs(svgs: Sequence[str], gap: float = 12) -> str:
    """One SVG holding ``svgs`` (documents made by this module) one below the other,
    ``gap`` px apart, as nested ``<svg>`` elements. O(total size)."""
    sizes = [_size(s) for s in svgs]
    width = max((w for w, _ in sizes), default=1.0)
    height = sum(h for _, h in sizes) + gap * max(len(svgs) - 1, 0)
    out = _svg_open(width, max(height, 1.0), "arboreal-stack", "arboreal pictures")
    y = 0.0
    for s, (_, h) in zip(svgs, sizes):
        out.append(s.lstrip().replace("<svg ", f'<svg x="0" y="{_f(y)}" ', 1))
        y += h + gap
    out.append("</svg>")
    return "\n".join(out)


_PAGE_STYLE = """body { font-family: DejaVu Sans, Noto Sans, Arial, sans-serif; margin: 1.5em;
       color: #222; background: #fff; }
h1 { font-size: 1.25em; }
h2 { font-size: 1em; font-weight: 600; margin: 1.5em 0 0.4em; overflow-wrap: anywhere; }
.figure { overflow-x: auto; }
svg { display: block; margin: 0.4em 0; }"""


def html_page(svgs: Sequence[str], titles: Sequence[str | None], *,
              page_title: str = "arboreal") -> str:
    """A self-contained HTML5 page (no script, no external resource, UTF-8) holding the
    SVG documents ``svgs`` inline, in order; ``titles[i]`` (escaped), when not None,
    becomes an ``<h2>`` heading before ``svgs[i]`` (a sentence's sent_id and text; None
    puts the picture under the previous heading). ``page_title``: the ``<title>`` and
    ``<h1>``. ValueError when the lengths differ. O(total size)."""
    if len(svgs) != len(titles):
        raise ValueError(f"{len(svgs)} SVGs but {len(titles)} titles")
    out = ["<!DOCTYPE html>", "<html>", "<head>", '<meta charset="utf-8"/>',
           f"<title>{escape(page_title)}</title>", f"<style>\n{_PAGE_STYLE}\n</style>",
           "</head>", "<body>", f"<h1>{escape(page_title)}</h1>"]
    open_section = False
    for svg, title in zip(svgs, titles):
        svg = svg.lstrip()
        if svg.startswith("<?xml"):
            svg = svg[svg.index("?>") + 2:].lstrip()
        if title is not None or not open_section:
            if open_section:
                out.append("</section>")
            out.append("<section>")
            open_section = True
            if title is not None:
                out.append(f"<h2>{escape(title)}</h2>")
        out.append(f'<div class="figure">\n{svg}\n</div>')
    if open_section:
        out.append("</section>")
    out.extend(["</body>", "</html>", ""])
    return "\n".join(out)


def sentence_title(sentence, position: int | None = None) -> str:
    """A heading for a sentence: its sent_id (or ``sentence K`` from the 1-based
    ``position``) and its ``# text`` (or its forms joined by spaces)."""
    text = None
    for c in sentence.comments:
        if c.startswith("# text"):
            key, sep, value = c[1:].partition("=")
            if sep and key.strip() == "text":
                text = value.strip()
                break
    if text is None:
        text = " ".join(str(x) for x in sentence.forms[1:])
    sid = sentence.sent_id
    name = sid if sid is not None else (f"sentence {position}" if position else "sentence")
    return f"{name}: {text}" if text else name

