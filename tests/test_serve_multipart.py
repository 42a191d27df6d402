"""The server's multipart/form-data parsing (the standard library's MIME parser behind
arboreal.server.parse_multipart) checked with hypothesis against an independent, strict
form-data parser, the ``multipart`` package (Bottle's): the same fields for every
well-formed body; and LF-only bodies give the same fields as their CRLF originals."""
from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from arboreal.server import HTTPError, parse_multipart

multipart = pytest.importorskip("multipart")

BOUNDARY_CHARS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=?"
boundaries = st.text(BOUNDARY_CHARS, min_size=1, max_size=70)
names = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters='"\\'),
                min_size=1, max_size=12)
# content: any bytes, with line ends and boundary-like pieces made likely
pieces = st.sampled_from([b"\r\n", b"\n", b"\r", b"--", b"-", b" ", b"\t", b"\x00", b"\xff",
                          b"Content-Disposition: x", b"caf\xc3\xa9"])
contents = st.lists(st.one_of(st.binary(max_size=12), pieces), max_size=12).map(b"".join)
parts = st.lists(st.tuples(names, contents, st.booleans(), st.booleans()), min_size=1,
                 max_size=5)


def body_of(fields, boundary: str, eol: bytes = b"\r\n", preamble: bytes = b"") -> bytes:
    """A form-data body: ``fields`` as (name, content, with a filename, with a
    Content-Type), ``eol`` ending every line of the structure."""
    out = [preamble + eol if preamble else b""]
    for name, content, filename, ctype in fields:
        out.append(b"--" + boundary.encode() + eol)
        out.append(f'Content-Disposition: form-data; name="{name}"'.encode("utf-8")
                   + (b'; filename="in.txt"' if filename else b"") + eol)
        if ctype:
            out.append(b"Content-Type: text/plain; charset=utf-8" + eol)
        out.append(eol + content + eol)
    out.append(b"--" + boundary.encode() + b"--" + eol)
    return b"".join(out)


def reference(body: bytes, boundary: str) -> dict[str, bytes]:
    """The fields as the ``multipart`` package parses them (last of a name wins)."""
    parser = multipart.MultipartParser(io.BytesIO(body), boundary, strict=True,
                                       charset="utf-8")
    return {part.name: part.raw for part in parser}


def well_formed(fields, boundary: str, eol: bytes) -> bool:
    delimiter = eol + b"--" + boundary.encode()
    return not any(delimiter in eol + content + eol or content.endswith(b"\r")
                   and eol == b"\n" for _, content, _, _ in fields)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts, boundaries, st.sampled_from([b"", b"a preamble", b"x\r\ny"]))
def test_same_fields_as_the_multipart_package(fields, boundary, preamble):
    assume(well_formed(fields, boundary, b"\r\n"))
    assume(b"--" + boundary.encode() not in preamble)
    body = body_of(fields, boundary, preamble=preamble)
    assert parse_multipart(body, boundary) == reference(body, boundary)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts, boundaries)
def test_lf_only_bodies_read_as_their_crlf_originals(fields, boundary):
    # a content ending in CR is ambiguous in an LF-only body (CR LF is a line end)
    assume(well_formed(fields, boundary, b"\r\n") and well_formed(fields, boundary, b"\n"))
    crlf = body_of(fields, boundary)
    lf = body_of(fields, boundary, b"\n")
    assert parse_multipart(lf, boundary) == parse_multipart(crlf, boundary) == \
        reference(crlf, boundary)


@settings(max_examples=300, deadline=None)
@given(parts, boundaries, st.data())
def test_a_truncated_body_is_never_taken_for_a_whole_one(fields, boundary, data):
    """A body cut anywhere before the end of its closing delimiter is a 400 (an upload
    cut short must not be parsed as complete); cut in the last line end, it is whole."""
    assume(well_formed(fields, boundary, b"\r\n"))
    body = body_of(fields, boundary, data.draw(st.sampled_from([b"\r\n", b"\n"])))
    end = body.rindex(b"--") + 2            # the end of the closing delimiter
    cut = data.draw(st.integers(0, len(body) - 1))
    if cut < end:
        with pytest.raises(HTTPError) as caught:
            parse_multipart(body[:cut], boundary)
        assert caught.value.status.startswith("400")
    else:
        assert parse_multipart(body[:cut], boundary) == parse_multipart(body, boundary)


@settings(max_examples=300, deadline=None)
@given(parts, boundaries, st.data())
def test_damaged_bodies_are_fields_or_a_400(fields, boundary, data):
    """Bytes dropped, inserted or overwritten anywhere: fields or an HTTPError 400, never
    another exception. (Where a damaged header is still readable, the MIME parser and
    the reference may read it differently: ``name=0"`` is ``0"`` to one, ``0`` to the
    other; both are guesses about a malformed body.)"""
    assume(well_formed(fields, boundary, b"\r\n"))
    body = bytearray(body_of(fields, boundary))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(body)))
        how = data.draw(st.sampled_from(["drop", "insert", "overwrite"]))
        junk = data.draw(st.sampled_from([b"\r", b"\n", b"-", b'"', b";", b"\xff", b":",
                                          b"\x00", boundary.encode()]))
        if how == "drop":
            del body[at:at + 1]
        elif how == "insert":
            body[at:at] = junk
        else:
            body[at:at + len(junk)] = junk
    try:
        got = parse_multipart(bytes(body), boundary)
    except HTTPError as exc:
        assert exc.status.startswith("400")
    else:
        assert isinstance(got, dict) and all(isinstance(k, str) and isinstance(v, bytes)
                                             for k, v in got.items())
