"""docs/benchmarks.md's "Results at a glance" copies figures from the sections it links:
every number of each row (and of each paragraph with links) must appear in those
sections, and every link to a section must reach an anchor of the file it names."""
from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
MAIN, ARCHIVE = DOCS / "benchmarks.md", DOCS / "benchmarks-archive.md"
SECTION = re.compile(r"<!-- BEGIN (\S+) -->\n.*?<!-- END \1 -->", re.S)
LINK = re.compile(r"\]\(((?:benchmarks(?:-archive)?\.md)?)#([^)]+)\)")
#: small counts that the summary names as settings, not as measured figures
SETTINGS = {"0", "1", "2", "3", "4", "5", "6", "10", "40", "256"}


def sections() -> dict[str, str]:
    out: dict[str, str] = {}
    for path in (MAIN, ARCHIVE):
        for m in SECTION.finditer(path.read_text(encoding="utf-8")):
            assert m.group(1) not in out, f"section {m.group(1)} is in both files"
            out[m.group(1)] = m.group(0)
    return out


def glance() -> str:
    text = MAIN.read_text(encoding="utf-8")
    start = text.index("## Results at a glance")
    return text[start:text.index("<!-- BEGIN ", start)]


def figures(text: str) -> list[str]:
    text = re.sub(r"\[[^\]]*\]\([^)]*\)", "", text)      # link texts and targets
    text = re.sub(r"`[^`]*`", "", text)                  # commands and options
    return [x.replace(",", "") for x in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def test_every_figure_of_the_summary_is_in_the_sections_it_links():
    found = sections()
    summary = glance()
    rows = [line for line in summary.splitlines() if line.startswith("|")]
    paragraphs = [p for p in re.split(r"\n\s*\n", summary) if not p.lstrip().startswith("|")]
    checked = 0
    for block in rows + paragraphs:
        names = [name for _, name in LINK.findall(block)]
        if not names:
            continue
        source = " ".join(found[n] for n in names).replace(",", "")
        for number in figures(block):
            if number not in SETTINGS:
                assert number in source, f"{number} is not in sections {names}: {block[:120]}"
                checked += 1
    assert checked > 100


def test_links_to_sections_reach_their_anchors():
    anchors = {path.name: set(re.findall(r'<a id="([^"]+)"></a>', path.read_text(encoding="utf-8")))
               for path in (MAIN, ARCHIVE)}
    for path in (MAIN, ARCHIVE):
        names = set(re.findall(r"<!-- BEGIN (\S+) -->", path.read_text(encoding="utf-8")))
        assert names <= anchors[path.name], names - anchors[path.name]
        for target, name in LINK.findall(path.read_text(encoding="utf-8")):
            assert name in anchors[target or path.name], (path.name, target, name)
