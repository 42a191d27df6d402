"""The byte-level kernels of :mod:`arboreal.io.conllu` (numba): line scanning, tree
checks, field interning. A separate module so that importing the CoNLL-U reader (and
``arboreal`` itself) does not import numba; :func:`arboreal.io.conllu._parse_chunk`
imports this module on first use."""
from __future__ import annotations

import numpy as np
from numba import njit

from arboreal.io.conllu import (_BADID, _BLANK, _COMMENT, _EMPTY, _HEAD_BAD, _HEAD_MISSING,
                                _HEAD_NONE, _MAX_DIGITS, _RANGE, _WORD)


@njit(cache=True)
def _parse_uint(buf, a, b):
    """Value of buf[a:b] as a canonical decimal integer, or -1 if it is not one."""
    if b <= a or b - a > _MAX_DIGITS:
        return -1
    if buf[a] == 48 and b - a > 1:  # leading zero
        return -1
    v = 0
    for i in range(a, b):
        c = buf[i]
        if c < 48 or c > 57:
            return -1
        v = v * 10 + (c - 48)
    return v


@njit(cache=True)
def _scan_lines(buf, starts, ends, kind, tabs, id1, id2, head, empty):
    """Classify every line and parse its ID and HEAD fields. O(bytes).

    kind: _BLANK/_COMMENT/_WORD/_RANGE/_EMPTY/_BADID; tabs: number of tabs;
    id1/id2: word ID, or range start/end, or empty node major/minor;
    head: HEAD value >= 0, _HEAD_MISSING for "_", _HEAD_BAD otherwise,
    _HEAD_NONE when the line has fewer than 7 fields; empty: 1-based number
    of the first empty field of a token line, else 0.
    """
    for i in range(len(starts)):
        a = starts[i]
        b = ends[i]
        id1[i] = -1
        id2[i] = -1
        head[i] = _HEAD_NONE
        if a == b:
            kind[i] = _BLANK
            tabs[i] = 0
            continue
        if buf[a] == 35:  # '#'
            kind[i] = _COMMENT
            tabs[i] = 0
            continue
        # field boundaries: ID = [a, e0), HEAD = [h0, h1)
        ntab = 0
        e0 = b
        h0 = -1
        h1 = b
        empty[i] = 0
        for j in range(a, b):
            if buf[j] == 9:
                if empty[i] == 0 and (j == a or buf[j - 1] == 9):
                    empty[i] = ntab + 1
                ntab += 1
                if ntab == 1:
                    e0 = j
                elif ntab == 6:
                    h0 = j + 1
                elif ntab == 7:
                    h1 = j
        tabs[i] = ntab
        if empty[i] == 0 and buf[b - 1] == 9:
            empty[i] = ntab + 1  # the last field
        # ID
        sep = -1
        for j in range(a, e0):
            c = buf[j]
            if c == 45 or c == 46:  # '-' or '.'
                sep = j
                break
        if sep < 0:
            v = _parse_uint(buf, a, e0)
            if v >= 1:
                kind[i] = _WORD
                id1[i] = v
            else:
                kind[i] = _BADID
        else:
            v1 = _parse_uint(buf, a, sep)
            v2 = _parse_uint(buf, sep + 1, e0)
            if buf[sep] == 45 and v1 >= 1 and v2 >= 1:
                kind[i] = _RANGE
            elif buf[sep] == 46 and v1 >= 0 and v2 >= 1:
                kind[i] = _EMPTY
            else:
                kind[i] = _BADID
            id1[i] = v1
            id2[i] = v2
        # HEAD
        if h0 >= 0:
            if h1 - h0 == 1 and buf[h0] == 95:  # '_'
                head[i] = _HEAD_MISSING
            else:
                v = _parse_uint(buf, h0, h1)
                head[i] = v if v >= 0 else _HEAD_BAD


@njit(cache=True)
def _check_trees(heads, starts):
    """First tree error of a corpus. O(total words).

    ``heads``: concatenated heads of all sentences, each sentence starting with
    its root entry (-1); sentence s occupies heads[starts[s]:starts[s+1]].
    Heads of -1 (unknown) are skipped; the root check applies only to
    sentences whose heads are all known.

    Returns (code, s, m, h): code 0 no error, 1 HEAD out of range, 2 self-head,
    3 no word attached to the root, 4 cycle through word m.
    """
    state = np.zeros(len(heads), np.int8)  # 0 new, 1 on current path, 2 done
    for s in range(len(starts) - 1):
        a = starts[s]
        n = starts[s + 1] - a - 1
        nroot = 0
        complete = True
        for m in range(1, n + 1):
            h = heads[a + m]
            if h < 0:
                complete = False
            elif h > n:
                return 1, s, m, h
            elif h == m:
                return 2, s, m, h
            elif h == 0:
                nroot += 1
        if complete and nroot == 0:
            return 3, s, 1, 0
        for m in range(1, n + 1):
            if state[a + m] != 0:
                continue
            x = m
            while x > 0 and state[a + x] == 0:
                state[a + x] = 1
                x = heads[a + x]
            if x > 0 and state[a + x] == 1:
                return 4, s, x, 0
            y = m
            while y > 0 and state[a + y] == 1:
                state[a + y] = 2
                y = heads[a + y]
    return 0, -1, -1, 0


@njit(cache=True)
def _intern_fields(buf, starts, ends, row_line):
    """Distinct values of the 8 string fields of all rows, found by hashing their bytes.

    row_line[r]: the line of row r, or -1 for a root row. Returns
    ``codes`` (rows, 8) int64: for each row and string column (2-6, 8-10 of the
    file), the index of its distinct value (one numbering shared by all
    columns; -1 on root rows), and ``rep_start``, ``rep_end``: the byte range
    of each distinct value's first occurrence. Open addressing, the table
    grown to stay at most half full (so it stays in cache). Values of up to 7
    bytes are their own exact key; longer ones are keyed by an FNV-1a hash,
    confirmed by comparing bytes. O(bytes) expected.
    """
    rows = len(row_line)
    codes = np.full((rows, 8), -1, np.int64)
    cap = 1 << 12
    slots = np.full((cap, 2), -1, np.int64)  # (hash, id)
    rep_start = np.empty(cap, np.int64)
    rep_end = np.empty(cap, np.int64)
    count = 0
    fs = np.empty(10, np.int64)
    fe = np.empty(10, np.int64)
    for r in range(rows):
        i = row_line[r]
        if i < 0:
            continue
        f = 0
        fs[0] = starts[i]
        for j in range(starts[i], ends[i]):
            if buf[j] == 9:
                fe[f] = j
                f += 1
                fs[f] = j + 1
        fe[f] = ends[i]
        for k in range(8):
            fld = k + 1 if k < 5 else k + 2  # skip ID (0) and HEAD (6)
            a = fs[fld]
            b = fe[fld]
            if b - a <= 7:
                # short value: its bytes and length make an exact key (< 2**59)
                key = np.int64(b - a) << 56
                for j in range(a, b):
                    key |= np.int64(buf[j]) << (8 * (j - a))
                exact = True
            else:
                h = np.uint64(14695981039346656037)
                for j in range(a, b):
                    h = (h ^ np.uint64(buf[j])) * np.uint64(1099511628211)
                key = np.int64(h >> np.uint64(2)) | (np.int64(1) << 62)  # disjoint from short keys
                exact = False
            mixed = np.uint64(key) * np.uint64(11400714819323198485)
            pos = np.int64(mixed >> np.uint64(40)) & (cap - 1)
            while True:
                u = slots[pos, 1]
                if u < 0:
                    slots[pos, 0] = key
                    slots[pos, 1] = count
                    rep_start[count] = a
                    rep_end[count] = b
                    codes[r, k] = count
                    count += 1
                    if 2 * count > cap:  # grow and rehash
                        cap *= 2
                        new = np.full((cap, 2), -1, np.int64)
                        for q in range(cap // 2):
                            if slots[q, 1] >= 0:
                                m2 = np.uint64(slots[q, 0]) * np.uint64(11400714819323198485)
                                p2 = np.int64(m2 >> np.uint64(40)) & (cap - 1)
                                while new[p2, 1] >= 0:
                                    p2 = (p2 + 1) & (cap - 1)
                                new[p2, 0] = slots[q, 0]
                                new[p2, 1] = slots[q, 1]
                        slots = new
                        rs = np.empty(cap, np.int64)
                        re_ = np.empty(cap, np.int64)
                        rs[:count] = rep_start[:count]
                        re_[:count] = rep_end[:count]
                        rep_start = rs
                        rep_end = re_
                    break
                if slots[pos, 0] == key:
                    if exact:
                        codes[r, k] = u
                        break
                    if rep_end[u] - rep_start[u] == b - a:
                        same = True
                        o = rep_start[u] - a
                        for j in range(a, b):
                            if buf[j] != buf[j + o]:
                                same = False
                                break
                        if same:
                            codes[r, k] = u
                            break
                pos = (pos + 1) & (cap - 1)
    return codes, rep_start[:count].copy(), rep_end[:count].copy()


@njit(cache=True)
def _gather_lines(buf, starts, ends, idx, size):
    """The bytes of lines idx, joined by newlines. O(bytes copied)."""
    out = np.empty(size, np.uint8)
    p = 0
    for k in range(len(idx)):
        i = idx[k]
        if k > 0:
            out[p] = 10
            p += 1
        for j in range(starts[i], ends[i]):
            out[p] = buf[j]
            p += 1
    return out[:p]
