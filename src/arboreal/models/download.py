"""``arboreal download``: a model from a JSON index into the local cache, safely.

**The index** is a JSON file, at any URL (``http(s)://``, ``file://``) or local path::

    {"format": "arboreal-model-index", "format_version": 1,
     "models": [{"name": "en_ewt", "version": "1.0", "url": "en_ewt-1.0.model",
                 "sha256": "<64 hex digits>", "size": 4213377,
                 "license": "CC BY-SA 4.0", "scores": {...}, "treebank": {...}}]}

``url`` may be relative to the index's own location. ``benchmarks/catalogue.py``
writes such an index beside the models it trains.

**The download** goes to a hidden folder inside the cache (same file system), is
checked (exact size, SHA-256, and a readable arboreal model) and only then renamed
into place as ``models/NAME/`` (``model.npz`` and ``card.json``), so the cache never
holds a partial or wrong model: on any failure, Ctrl-C or SIGTERM the hidden folder is
removed. A connection that breaks mid-file is resumed where it broke (HTTP ``Range``;
a server that ignores it sends the whole file again, and the download restarts), at
most ``retries`` times, then the command fails cleanly. Network errors (offline,
connection refused, unknown host, HTTP errors, time-outs) are one line.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

from arboreal.errors import ArborealError, ModelError
from arboreal.models.names import (CARD_FILE, MODEL_FILE, cache_folder, check_name, closest)

INDEX_FORMAT = "arboreal-model-index"
INDEX_FORMAT_VERSION = 1
#: environment variable naming the index when --index is not given
INDEX_VARIABLE = "ARBOREAL_INDEX"
MAX_INDEX_BYTES = 16 << 20
#: the deepest nesting of lists and objects an index may have (an entry's scores are 3
#: levels down; a deeper one is refused, not parsed further)
MAX_INDEX_DEPTH = 16
#: the largest model an index may list (a model file's own limit, about 10 GiB)
MAX_MODEL_BYTES = 10 << 30
RETRIES = 3
TIMEOUT_SECONDS = 60.0
CHUNK_BYTES = 1 << 16
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


class _Broken(Exception):
    """The connection ended before the whole file came (resumable)."""


def _as_url(source: str) -> str:
    """An index or model location as a URL: local paths become ``file://`` URLs."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", source):
        return source
    return Path(source).expanduser().resolve().as_uri()


def _one_line(text) -> str:
    return " ".join(str(text).split())


def _network_error(where: str, exc: BaseException) -> ArborealError:
    """One line for a failed request (urllib's own messages may hold several)."""
    if isinstance(exc, urllib.error.HTTPError):
        reason = _one_line(exc.reason)
        if "infinite loop" in reason or "redirect" in reason.lower():
            return ArborealError(f"{where}: HTTP error {exc.code}: a redirect loop")
        return ArborealError(f"{where}: HTTP error {exc.code} {reason}")
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ConnectionRefusedError):
        text = "connection refused (is the server up? offline?)"
    elif isinstance(reason, socket.gaierror):
        text = "unknown host (offline, or a wrong address?)"
    elif isinstance(reason, (TimeoutError, socket.timeout)):
        text = "timed out (offline, or a slow server?)"
    elif isinstance(reason, FileNotFoundError):
        text = "no such file"
    elif isinstance(reason, OSError):
        text = reason.strerror or reason.__class__.__name__
    else:
        text = str(reason) or reason.__class__.__name__
    return ArborealError(f"{where}: cannot download ({_one_line(text)})")


def _open(url: str, start: int = 0):
    from arboreal import __version__

    headers = {"User-Agent": f"arboreal/{__version__}"}
    if start:
        headers["Range"] = f"bytes={start}-"
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                      timeout=TIMEOUT_SECONDS)
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        raise _network_error(url, exc) from None


def read_index(source: str) -> tuple[str, list[dict]]:
    """``(url, entries)`` of the index at ``source`` (URL or path): the entries checked
    (name, version, url made absolute, sha256, size; license and scores kept).
    ArborealError naming the index on any problem."""
    url = _as_url(source)
    with _open(url) as response:
        try:
            data = response.read(MAX_INDEX_BYTES + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise _network_error(source, exc) from None
    if len(data) > MAX_INDEX_BYTES:
        raise ArborealError(f"{source}: a model index of more than {MAX_INDEX_BYTES} bytes")
    try:
        index = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ArborealError(f"{source}: not a model index (not JSON: "
                            f"{exc.__class__.__name__})") from None
    except RecursionError:
        index = None
    if index is None or _depth(index) > MAX_INDEX_DEPTH:
        raise ArborealError(f"{source}: not a model index (JSON nested deeper than "
                            f"{MAX_INDEX_DEPTH} levels)")
    models = index.get("models") if isinstance(index, dict) else index
    if isinstance(index, dict) and index.get("format", INDEX_FORMAT) != INDEX_FORMAT:
        raise ArborealError(f"{source}: not an arboreal model index (format "
                            f"{index.get('format')!r:.40})")
    if not isinstance(models, list):
        raise ArborealError(f"{source}: not a model index (no list of models)")
    return url, [_entry(source, url, k, e) for k, e in enumerate(models)]


def _depth(value) -> int:
    """How deeply lists and objects nest in a JSON value (0 for a scalar); iterative,
    and it stops counting past :data:`MAX_INDEX_DEPTH`."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if level > MAX_INDEX_DEPTH:
                return level
            todo.extend((v, level + 1) for v in (node.values() if isinstance(node, dict)
                                                 else node))
    return deepest


#: the schemes a model's url may have in an index fetched over the network
REMOTE_SCHEMES = ("http", "https")


def _entry(source: str, base: str, k: int, entry) -> dict:
    where = f"{source}: model {k + 1}"
    if not isinstance(entry, dict):
        raise ArborealError(f"{where} is not a JSON object")
    for key, kind in (("name", str), ("version", str), ("url", str), ("sha256", str),
                      ("size", int)):
        if not isinstance(entry.get(key), kind) or isinstance(entry.get(key), bool):
            raise ArborealError(f"{where}: field {key!r} is missing or not a "
                                f"{'string' if kind is str else 'number'}")
    try:
        check_name(entry["name"])
    except ModelError as exc:
        raise ArborealError(f"{where}: {exc}") from None
    if not _SHA256.fullmatch(entry["sha256"].lower()):
        raise ArborealError(f"{where}: sha256 must be 64 hexadecimal digits")
    if not 0 < entry["size"] <= MAX_MODEL_BYTES:
        raise ArborealError(f"{where}: size must lie in 1..{MAX_MODEL_BYTES}")
    for key in ("scores", "treebank"):
        if key in entry and not isinstance(entry[key], dict):
            raise ArborealError(f"{where}: field {key!r} must be a JSON object")
    url = urllib.parse.urljoin(base, entry["url"])
    if urllib.parse.urlsplit(base).scheme in REMOTE_SCHEMES and \
            urllib.parse.urlsplit(url).scheme not in REMOTE_SCHEMES:
        raise ArborealError(f"{where}: url {entry['url']!r:.80} is not http(s); an index "
                            "fetched over the network may only name http(s) URLs")
    return {**entry, "sha256": entry["sha256"].lower(), "url": url}


def find_entry(source: str, entries: list[dict], name: str) -> dict:
    """The entry of model ``name`` (the last one if the index lists it twice);
    ArborealError listing the index's names and the closest one otherwise."""
    found = [e for e in entries if e["name"] == name]
    if found:
        return found[-1]
    names = sorted({e["name"] for e in entries})
    if not names:
        raise ArborealError(f"{name}: not in the model index {source}, which lists no model")
    raise ArborealError(f"{name}: not in the model index {source} (it has: {', '.join(names)}; "
                        f"closest: {closest(name, names)})")


def _fetch(url: str, f, size: int, retries: int, log: Callable[[str], None],
           progress: Callable[[int], None] | None) -> str:
    """Write the ``size`` bytes at ``url`` to the binary file ``f``; returns their
    SHA-256. A broken connection is resumed (Range) up to ``retries`` times."""
    hasher, got, failures = hashlib.sha256(), 0, 0
    while True:
        try:
            with _open(url, got) as response:
                status = getattr(response, "status", None) or 200
                if got and status == 206:
                    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", ""))
                    resumed = match is not None and int(match.group(1)) == got
                else:
                    resumed = False
                if got and not resumed:        # the whole file again: start over
                    log("download: the server sends the whole file again; restarting")
                    f.seek(0)
                    f.truncate()
                    hasher, got = hashlib.sha256(), 0
                while True:
                    try:
                        chunk = response.read(CHUNK_BYTES)
                    except (OSError, http.client.HTTPException) as exc:
                        raise _Broken(str(exc) or exc.__class__.__name__) from None
                    if not chunk:
                        break
                    got += len(chunk)
                    if got > size:
                        raise ArborealError(f"{url}: the server sends more than the {size} "
                                            "bytes the index gives (a different file?)")
                    f.write(chunk)
                    hasher.update(chunk)
                    if progress is not None:
                        progress(len(chunk))
            if got == size:
                return hasher.hexdigest()
            raise _Broken("the connection closed early")
        except _Broken as exc:
            failures += 1
            if failures > retries:
                raise ArborealError(f"{url}: the download broke off after {got} of {size} "
                                    f"bytes ({exc}), {retries} times resumed; nothing was "
                                    "kept, try again") from None
            log(f"download: broke off after {got} of {size} bytes ({exc}); resuming")


def download(name: str, index: str | None = None, retries: int = RETRIES,
             log: Callable[[str], None] | None = None,
             progress: Callable[[int], None] | None = None, force: bool = False) -> Path:
    """Download model ``name`` listed in ``index`` (URL or path; default
    ``$ARBOREAL_INDEX``) into the cache; returns the model file's path. Does nothing
    when the cache holds that very file already (same SHA-256), unless ``force``.
    ArborealError (one line) on any problem, with nothing left in the cache."""
    from arboreal.models import open_model
    from arboreal.models.cards import card_json, card_of, complete_card, read_card_file

    say = log or (lambda line: None)
    check_name(name)
    source = index or os.environ.get(INDEX_VARIABLE)
    if not source:
        raise ArborealError(f"no model index: give --index URL|FILE or set {INDEX_VARIABLE} "
                            "(arboreal publishes none yet; see 'Models by name' in README)")
    _, entries = read_index(source)
    entry = find_entry(source, entries, name)
    folder = cache_folder()
    final = folder / name
    if not force and (final / MODEL_FILE).is_file() and (final / CARD_FILE).is_file():
        try:
            if read_card_file(final / CARD_FILE).get("sha256") == entry["sha256"]:
                say(f"download: {name} {entry['version']} is in the cache already ({final})")
                return final / MODEL_FILE
        except ModelError:
            pass
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < entry["size"]:
        raise ArborealError(f"{folder}: {entry['size']} bytes needed, {free} free")
    from arboreal._atomic import remove_stale, temporary_name

    remove_stale(folder)
    part = folder / temporary_name(name, ".part")
    part.mkdir(mode=0o700)
    try:
        say(f"download: {name} {entry['version']} ({entry['size']} bytes) from {entry['url']}")
        with open(part / MODEL_FILE, "wb") as f:
            digest = _fetch(entry["url"], f, entry["size"], retries, say, progress)
        if digest != entry["sha256"]:
            raise ArborealError(f"{entry['url']}: SHA-256 {digest} differs from the index's "
                                f"{entry['sha256']}: refused (a damaged or different file)")
        try:
            _, meta, arrays = open_model(part / MODEL_FILE)
            arrays.close()
        except ModelError as exc:
            raise ArborealError(f"{entry['url']}: not a model this arboreal reads "
                                f"({str(exc).split(': ', 1)[-1]})") from None
        card = card_of(meta, name)
        for key in ("version", "license", "scores", "treebank", "description", "speed"):
            if key in entry:
                card[key] = entry[key]
        card.update(sha256=digest, size_bytes=entry["size"], source=entry["url"])
        (part / CARD_FILE).write_text(card_json(complete_card(card)), encoding="utf-8")
        _replace_folder(part, final)
    finally:
        shutil.rmtree(part, ignore_errors=True)
    say(f"download: {name} {entry['version']} is in {final}")
    return final / MODEL_FILE


def _replace_folder(new: Path, final: Path) -> None:
    """Rename the folder ``new`` to ``final``, replacing an older ``final`` (moved aside
    first, then removed: a reader never sees a half-written model)."""
    old = None
    if final.exists():
        from arboreal._atomic import temporary_name

        old = final.parent / temporary_name(final.name, ".part")
        old.mkdir(mode=0o700)
        os.replace(final, old / "model")
    try:
        os.replace(new, final)
    except OSError:
        if old is not None:
            os.replace(old / "model", final)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
