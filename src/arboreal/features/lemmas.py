"""Lemmas as edit rules, and the lookup of the training words' lemmas that comes before
any rule: shared by the linear tagger (:mod:`arboreal.models.tagger`) and the neural
scorer's lemma classifier, stored in model files as two string arrays."""
from __future__ import annotations

import difflib
from collections import Counter, defaultdict

from arboreal.io.model_file import get_string_list, put_strings


def lemma_rule(form: str, lemma: str) -> str:
    """The edit taking ``form`` to ``lemma`` around their longest common substring:
    ``case|cut_prefix|cut_suffix|len(add_prefix)|add_prefix add_suffix``; case ``k``
    keeps the form's case, ``l`` lower-cases it first, ``t`` title-cases it (whichever
    needs the smallest edit, in that order on ties)."""
    best = None
    for case in "klt":
        src = _cased(form, case)
        m = difflib.SequenceMatcher(None, src, lemma, autojunk=False).find_longest_match(
            0, len(src), 0, len(lemma))
        cut_p, add_p = m.a, lemma[: m.b]
        cut_s, add_s = len(src) - m.a - m.size, lemma[m.b + m.size:]
        cost = len(add_p) + len(add_s) + cut_p + cut_s
        if best is None or cost < best[0]:
            best = (cost, f"{case}|{cut_p}|{cut_s}|{len(add_p)}|{add_p}{add_s}")
    return best[1]


def _cased(form: str, case: str) -> str:
    if case == "l":
        return form.lower()
    if case == "t":
        return form[:1].upper() + form[1:].lower()
    return form


def apply_rule(form: str, rule: str) -> str:
    """Apply a :func:`lemma_rule` to ``form`` (the form itself if it does not fit)."""
    try:
        case, cut_p, cut_s, n_add_p, added = rule.split("|", 4)
        cut_p, cut_s, n_add_p = int(cut_p), int(cut_s), int(n_add_p)
    except ValueError:
        return form
    src = _cased(form, case)
    if cut_p + cut_s > len(src):
        return form
    out = added[:n_add_p] + src[cut_p: len(src) - cut_s] + added[n_add_p:]
    return out or form


def _group(pairs: Counter) -> dict[tuple[str, str], set]:
    """(form, UPOS) -> the lemmas it had, from a Counter of (form, UPOS, lemma)."""
    out: dict[tuple[str, str], set] = defaultdict(set)
    for f, t, lem in pairs:
        out[(f, t)].add(lem)
    return out


def build_lemma_lookup(forms: list[str], upos: list[str], lemmas: list[str],
                       feats: list[str] | None = None) -> dict[tuple[str, str], str]:
    """The lemmas of the training words, looked up before any rule applies: (form, UPOS)
    -> its most frequent lemma; (form, "") -> the one lemma of a form that had only one
    whatever its UPOS (it serves a predicted UPOS the form never had); with ``feats``,
    (form, "UPOS|FEATS") -> the most frequent lemma where (form, UPOS) had several
    (English "her": Case=Acc "she", Poss=Yes "her"). Flat lists over the words;
    O(words)."""
    pairs = Counter(zip(forms, upos, lemmas))
    best: dict[tuple[str, str], tuple[int, str]] = {}
    for (f, t, lem), k in pairs.items():
        if (f, t) not in best or k > best[(f, t)][0]:
            best[(f, t)] = (k, lem)
    lookup = {key: lem for key, (k, lem) in best.items()}
    lemmas_of: dict[str, set] = defaultdict(set)
    for (f, _, lem) in pairs:
        lemmas_of[f].add(lem)
    lookup.update({(f, ""): next(iter(lems)) for f, lems in lemmas_of.items() if len(lems) == 1})
    if feats is not None:
        ambiguous = {(f, t) for (f, t), lems in _group(pairs).items() if len(lems) > 1}
        fine: dict[tuple[str, str], tuple[int, str]] = {}
        for (f, t, x, lem), k in Counter(zip(forms, upos, feats, lemmas)).items():
            key = (f, f"{t}|{x}")
            if (f, t) in ambiguous and (key not in fine or k > fine[key][0]):
                fine[key] = (k, lem)
        lookup.update({key: lem for key, (k, lem) in fine.items()})
    return lookup


def lookup_lemmas(lookup: dict[tuple[str, str], str], forms, upos, feats, rules) -> list[str]:
    """The lemma of each word: from ``lookup`` (:func:`build_lemma_lookup`) by form and
    UPOS|FEATS, form and UPOS, form alone, lower-cased form and UPOS, in that order; else
    its predicted rule applied to the form (:func:`apply_rule`). Flat sequences over the
    words; O(words)."""
    return [lookup.get((f, f"{t}|{x}")) or lookup.get((f, t)) or lookup.get((f, ""))
            or lookup.get((f.lower(), t)) or apply_rule(f, r)
            for f, t, x, r in zip(forms, upos, feats, rules)]


def put_lemma_lookup(arrays: dict, prefix: str, lookup: dict[tuple[str, str], str]) -> None:
    """Store ``lookup`` in a model file's arrays ``{prefix}_keys`` ("form\\tkey") and
    ``{prefix}_values``."""
    keys = sorted(lookup)
    put_strings(arrays, f"{prefix}_keys", [f"{f}\t{t}" for f, t in keys])
    put_strings(arrays, f"{prefix}_values", [lookup[k] for k in keys])


def get_lemma_lookup(arrays, prefix: str) -> dict[tuple[str, str], str]:
    """The lookup :func:`put_lemma_lookup` stored (ValueError if its arrays disagree)."""
    keys = get_string_list(arrays, f"{prefix}_keys")
    values = get_string_list(arrays, f"{prefix}_values")
    if len(keys) != len(values):
        raise ValueError(f"lemma lookup {prefix}: keys and values differ in length")
    lookup = {}
    for k, v in zip(keys, values):
        form, sep, tag = k.partition("\t")
        if not sep:
            raise ValueError(f"lemma lookup {prefix}: a key without a tab")
        lookup[(form, tag)] = v
    return lookup
