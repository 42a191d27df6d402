"""The pictures of ``arboreal show`` in a real browser: headless Chromium renders a page of
trees (one non-projective, one of wide glyphs such as ``WWWWWWWWWWWW``) and a heat map;
the screenshot must show ink, red crossing arcs and blue cells, and every ``<text>``
must be laid out with a non-zero size inside its picture, the words (and the tags) of
a tree side by side without overlapping.

Needs ``/usr/bin/chromium`` (Debian: ``apt-get install -y chromium``); skipped without it.
"""
from __future__ import annotations

import html
import json
import os
import re
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from arboreal.io.conllu import read_conllu
from arboreal.io.sentence import Sentence
from arboreal.io.svg import html_page, marginals_svg, sentence_title, tree_svg
from arboreal.trees import nonprojective_arcs

CHROMIUM = "/usr/bin/chromium"
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "en_ewt-sample-test.conllu"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM),
                       reason=f"{CHROMIUM} is not installed (apt-get install -y chromium)"),
]

#: test-only script: the layout of every <text> (the pages arboreal writes have none)
MEASURE = """<script>
(function () {
  var out = [];
  document.querySelectorAll("svg text").forEach(function (t) {
    var r = t.getBoundingClientRect();
    var svg = t.ownerSVGElement;
    while (svg.ownerSVGElement) { svg = svg.ownerSVGElement; }
    var s = svg.getBoundingClientRect();
    var figure = Array.prototype.indexOf.call(document.querySelectorAll("div.figure > svg"), svg);
    out.push({text: t.textContent, cls: t.getAttribute("class") || "", figure: figure,
              left: r.left, right: r.right, top: r.top, bottom: r.bottom,
              svg: [s.left, s.top, s.right, s.bottom]});
  });
  var pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile{len(list(tmp_path.iterdir()))}"
    profile.mkdir()
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
           f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, timeout=60)


def read_png(path: Path) -> np.ndarray:
    """(height, width, channels) uint8 of an 8-bit, non-interlaced RGB or RGBA PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    assert len(raw) == height * (stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1)
        if f == 0:
            cur = line.copy()
        elif f == 1:        # Sub: running sum per channel, modulo 256
            cur = np.cumsum(line.reshape(width, bpp), axis=0, dtype=np.uint8).ravel()
        elif f == 2:        # Up
            cur = line + prev
        else:               # Average, Paeth: sequential along the row
            cur_l = bytearray(stride)
            p_l, x_l = prev.tolist(), line.tolist()
            for i in range(stride):
                a = cur_l[i - bpp] if i >= bpp else 0
                b = p_l[i]
                if f == 3:
                    cur_l[i] = (x_l[i] + ((a + b) >> 1)) & 255
                else:
                    c = p_l[i - bpp] if i >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                    cur_l[i] = (x_l[i] + pred) & 255
            cur = np.frombuffer(bytes(cur_l), np.uint8)
        out[y] = cur
        prev = out[y]
    return out.reshape(height, width, bpp)[:, :, :3]


@pytest.fixture(scope="module")
def page():
    sentences = read_conllu(SAMPLE)
    nonproj = next(i for i, s in enumerate(sentences) if nonprojective_arcs(s.heads)
                   and len(s) <= 16)
    chosen = [sentences[nonproj], sentences[0], sentences[2]]
    rng = np.random.default_rng(1)
    first = chosen[0]
    n = len(first)
    p = rng.random((n + 1, n + 1)) ** 3
    p[:, 0] = 0
    p[np.arange(n + 1), np.arange(n + 1)] = 0
    p[first.heads[1:], np.arange(1, n + 1)] += 2.0        # the tree's cells dominate
    p[:, 1:] /= p[:, 1:].sum(axis=0)
    # wide glyphs, which a per-character guess laid out narrower than they are drawn
    chosen.append(Sentence.from_columns(
        ["WWWWWWWWWWWW", "MMMMMMMM", "\u2014\u2167\u2014", "\u6f22\u5b57\u6f22\u5b57",
         "\u0152\u00c6\u0152\u00c6", "@@@@", "WWWWWWWWWWWW"],
        [2, 0, 2, 2, 4, 2, 2], ["nsubj", "root", "punct", "obj", "nmod", "dep", "obl"],
        upos=["PROPN", "NOUN", "PUNCT", "X", "NOUN", "SYM", "PROPN"]))
    svgs = [tree_svg(chosen[0]), marginals_svg(first.forms, p, heads=first.heads),
            tree_svg(chosen[1]), tree_svg(chosen[2], title="<a title> & more"),
            tree_svg(chosen[3], title="WWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWWW")]
    titles = [sentence_title(chosen[0]), None, sentence_title(chosen[1]),
              sentence_title(chosen[2]), None]
    text = html_page(svgs, titles, page_title="browser test")
    assert "<script" not in text
    return text, chosen


def test_screenshot_shows_trees_crossings_and_heat_map(page, tmp_path):
    text, _ = page
    src = tmp_path / "page.html"
    src.write_text(text, encoding="utf-8")
    shot = tmp_path / "shot.png"
    r = chromium([f"--screenshot={shot}", "--window-size=1000,1100", src.as_uri()], tmp_path)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    img = read_png(shot).astype(np.int64)
    assert img.shape[:2] == (1100, 1000)
    R, G, B = img[..., 0], img[..., 1], img[..., 2]
    ink = (img < 235).any(axis=-1).mean()
    assert 0.01 < ink < 0.6, f"share of non-white pixels {ink:.4f}"
    red = ((R > 150) & (G < 100) & (B < 100)).sum()          # the crossing arcs (#d62728)
    blue = ((B > R + 60) & (B > 100)).sum()                  # heat-map cells
    orange = ((R > 200) & (G > 60) & (G < 140) & (B < 60)).sum()   # predicted-tree outline
    assert red > 100 and blue > 1000 and orange > 100, (red, blue, orange)


def test_every_text_is_laid_out_inside_its_picture(page, tmp_path):
    text, chosen = page
    src = tmp_path / "measure.html"
    src.write_text(text.replace("</body>", MEASURE + "\n</body>"), encoding="utf-8")
    r = chromium(["--dump-dom", "--window-size=1400,1000", src.as_uri()], tmp_path)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    dom = r.stdout.decode("utf-8")
    match = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    assert match, "the measuring script did not run"
    boxes = json.loads(html.unescape(match.group(1)))
    assert len(boxes) == text.count("<text ")
    for b in boxes:
        assert b["right"] - b["left"] > 0.5 and b["bottom"] - b["top"] > 0.5, b
        left, top, right, bottom = b["svg"]
        assert left - 1 <= b["left"] and b["right"] <= right + 1, b
        assert top - 1 <= b["top"] and b["bottom"] <= bottom + 1, b
    trees = {0: chosen[0], 2: chosen[1], 3: chosen[2], 4: chosen[3]}   # figure -> sentence
    for figure, s in trees.items():
        words = [b for b in boxes if b["figure"] == figure and b["cls"] == "form"]
        assert [b["text"] for b in words] == list(s.forms[1:])
        for a, b in zip(words, words[1:]):                   # side by side, no overlap
            assert a["right"] <= b["left"] + 0.5, (a, b)
            assert abs(a["top"] - b["top"]) < 1
        tags = [b for b in boxes if b["figure"] == figure and b["cls"] == "upos"]
        assert [b["text"] for b in tags] == list(s.upos[1:])
        assert min(t["top"] for t in tags) >= max(w["top"] for w in words)
        for a, b in zip(tags, tags[1:]):
            assert a["right"] <= b["left"] + 0.5, (a, b)
    titles = [b["text"] for b in boxes if b["figure"] == 3 and b["cls"] == "title"]
    assert titles == ["<a title> & more"]
    cells = [b for b in boxes if b["figure"] == 1 and b["cls"] == "prob"]
    assert len(cells) >= len(chosen[0])                      # the tree's cells at least
