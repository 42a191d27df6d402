"""arboreal.io.adapters (conllu package) and arboreal.integrations.spacy (spaCy component)."""
from __future__ import annotations

import importlib
import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from arboreal.errors import ArborealError
from arboreal.io.conllu import format_conllu, read_conllu

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
UD = Path("/work/shared/data/ud")


@pytest.fixture(scope="module")
def conllu():
    return pytest.importorskip("conllu")


@pytest.fixture(scope="module")
def adapters(conllu):
    from arboreal.io import adapters

    return adapters


def test_optional_packages_not_imported_by_arboreal():
    code = ("import sys, arboreal, arboreal.io, arboreal.io.adapters, arboreal.integrations; "
            "bad = [m for m in ('conllu', 'spacy') if m in sys.modules]; "
            "assert not bad, bad")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_missing_conllu_is_reported(monkeypatch, adapters):
    from arboreal.integrations import MissingExtraError

    monkeypatch.setitem(sys.modules, "conllu", None)
    monkeypatch.setattr(adapters, "_CONLLU", None)
    s = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[0]
    with pytest.raises(MissingExtraError, match=r"pip install 'arboreal\[conllu\]'") as info:
        adapters.to_tokenlist(s)
    assert isinstance(info.value, ImportError) and isinstance(info.value, ArborealError)


# ---------------------------------------------------------------------------- conllu


def _check_round_trips(conllu, adapters, text: str, path) -> list:
    """The round trips of the module docstring on one CoNLL-U text; the sentences."""
    sents = read_conllu(path)
    reference = format_conllu(sents)
    # conllu.parse -> from_tokenlist gives what arboreal's own reader gives
    parsed = conllu.parse(text, metadata_parsers=adapters.KEEP_ALL_COMMENTS)
    assert format_conllu(adapters.from_tokenlists(parsed)) == reference
    # to_tokenlist gives what conllu.parse gives, token for token, metadata too
    mine = adapters.to_tokenlists(sents)
    assert len(mine) == len(parsed)
    for a, b in zip(mine, parsed):
        assert list(a) == list(b)
        assert a.metadata == b.metadata
    # conllu's serializer of to_tokenlist parses back to equal tokens
    back = conllu.parse("".join(t.serialize() for t in mine),
                        metadata_parsers=adapters.KEEP_ALL_COMMENTS)
    for a, b in zip(mine, back):
        assert list(a) == list(b) and a.metadata == b.metadata
    # and from_tokenlist(to_tokenlist(s)) is s
    assert format_conllu(adapters.from_tokenlists(mine)) == reference
    return sents


@pytest.mark.parametrize("name", ["en_ewt-sample-train.conllu", "en_ewt-sample-test.conllu"])
def test_sample_round_trips(conllu, adapters, name):
    path = SAMPLE / name
    text = path.read_text(encoding="utf-8")
    sents = _check_round_trips(conllu, adapters, text, path)
    # EWT comments are all "key = value": conllu's default parse keeps them too
    plain = adapters.from_tokenlists(conllu.parse(text))
    assert format_conllu(plain) == format_conllu(sents)
    t = adapters.to_tokenlist(sents[0])
    assert t.metadata["sent_id"] == sents[0].sent_id and "text" in t.metadata
    ids = [tok["id"] for tok in t if isinstance(tok["id"], int)]
    assert ids == list(range(1, len(sents[0]) + 1))


@pytest.mark.parametrize("treebank,pattern,kinds", [
    ("UD_English-EWT", "*-dev.conllu", (".",)),         # empty nodes
    ("UD_Spanish-AnCora", "*-dev.conllu", ("-",)),      # multiword tokens
    ("UD_Czech-CAC", "*-dev.conllu", ("-", ".")),       # both
])
def test_real_treebank_round_trips(conllu, adapters, tmp_path, treebank, pattern, kinds):
    files = sorted((UD / treebank).glob(pattern)) if (UD / treebank).is_dir() else []
    if not files:
        pytest.skip(f"{treebank} is not under {UD}")
    blocks = files[0].read_text(encoding="utf-8").split("\n\n")
    special = [b for b in blocks if any(k in line.split("\t")[0] for line in b.split("\n")
                                        if not line.startswith("#") for k in kinds)]
    chosen = blocks[:150] + [b for b in special[:150] if b not in blocks[:150]]
    text = "\n\n".join(b.strip("\n") for b in chosen if b.strip()) + "\n\n"
    path = tmp_path / "part.conllu"
    path.write_text(text, encoding="utf-8")
    sents = _check_round_trips(conllu, adapters, text, path)
    lines = [line for s in sents for _, line in s.extra]
    for k in kinds:
        assert any(k in line.split("\t")[0] for line in lines), f"no {k!r} ids in the sample"


IRREGULAR = """\
# newdoc id = d1
# newpar
#sent_id=odd-1
# note = first
# note = second
# orig_file_sentence 001#1
# text = Del  gato
1-2\tDel\t_\t_\t_\t_\t_\t_\t_\t_
1\tDe\tde\tADP\t_\t_\t3\tcase\t3:case\tGloss=a=b|Translit=
2\tel\tel\tDET\tDT\tDefinite=Def|PronType=Art\t3\tdet\t3:det\tTranslit=|x
3\tgato\tgato\tNOUN\tNN\tGender=Masc|Number=Sing|Typo\t0\troot\t0:root|3.1:dep\tSpaceAfter=No
3.1\tes\tser\tAUX\t_\t_\t_\t_\t3:cop\t_

# sent_id = plain
# text = x
1\tx\t_\tX\t_\t_\t_\t_\t_\t_

"""


def test_irregular_values_are_kept_exactly(adapters, tmp_path):
    path = tmp_path / "irregular.conllu"
    path.write_text(IRREGULAR, encoding="utf-8")
    sents = read_conllu(path, allow_missing_heads=True)
    tls = adapters.to_tokenlists(sents)
    assert format_conllu(adapters.from_tokenlists(tls)) == IRREGULAR
    t = tls[0]
    assert [tok["id"] for tok in t] == [(1, "-", 2), 1, 2, 3, (3, ".", 1)]
    words = {tok["id"]: tok for tok in t}
    assert words[1]["misc"] == "Gloss=a=b|Translit="   # "Translit=" has no dict spelling
    assert words[1]["xpos"] is None and words[1]["feats"] is None and words[1]["upos"] == "ADP"
    assert words[2]["feats"] == {"Definite": "Def", "PronType": "Art"}
    assert words[2]["misc"] == "Translit=|x"   # no dict spells it: kept as the string
    assert words[3]["feats"] == {"Gender": "Masc", "Number": "Sing", "Typo": ""}
    assert words[3]["deps"] == [("root", 0), ("dep", (3, ".", 1))]
    assert words[3]["head"] == 0 and words[1]["deps"] == [("case", 3)]
    assert t.metadata["sent_id"] == "odd-1" and t.metadata["note"] == "second"
    assert t.metadata["newpar"] is None and t.metadata["orig_file_sentence 001#1"] is None
    # the second sentence: unknown head, "_" as conllu has it
    w = tls[1][0]
    assert w["head"] is None and w["deprel"] == "_" and w["lemma"] == "_"
    assert adapters.from_tokenlist(tls[1]).heads.tolist() == [-1, -1]


def test_edited_metadata_is_written(adapters):
    s = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[0]
    t = adapters.to_tokenlist(s)
    t.metadata["sent_id"] = "changed"
    t.metadata["new_key"] = "v"
    back = adapters.from_tokenlist(t)
    assert back.sent_id == "changed" and back.comments[-1] == "# new_key = v"
    # and an edited irregular sentence drops the saved original lines
    t2 = adapters.to_tokenlist(read_conllu(io.StringIO(IRREGULAR), allow_missing_heads=True)[0])
    assert hasattr(t2, "arboreal_comments")
    t2.metadata["note"] = "third"
    assert "# note = third" in adapters.from_tokenlist(t2).comments


def test_tokens_and_heads_edited_in_the_token_list(adapters):
    s = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[1]
    t = adapters.to_tokenlist(s)
    word = next(tok for tok in t if tok["id"] == 1)
    word["upos"] = "X"
    word["feats"] = {"Foo": "Bar", "Baz": "Qux"}
    back = adapters.from_tokenlist(t)
    assert back.upos[1] == "X" and back.feats[1] == "Foo=Bar|Baz=Qux"
    assert (back.heads == s.heads).all() and (back.forms == s.forms).all()


def _tokenlist(conllu, heads, sent_id="s-7"):
    tokens = [{"id": i, "form": f"w{i}", "lemma": "_", "upos": "X", "xpos": None, "feats": None,
               "head": h, "deprel": "dep", "deps": None, "misc": None}
              for i, h in enumerate(heads, 1)]
    from conllu.models import Metadata, TokenList

    return TokenList(tokens, Metadata(sent_id=sent_id))


@pytest.mark.parametrize("edit,message", [
    (lambda t: t[1].update(head="2"), r"s-7: word 2: HEAD must be an integer"),
    (lambda t: t[1].update(head=2.0), r"HEAD must be an integer"),
    (lambda t: t[1].update(head=True), r"HEAD must be an integer"),
    (lambda t: t[1].update(head=9), r"s-7: word 2: HEAD 9 is out of range 0\.\.3"),
    (lambda t: t[1].update(head=-1), r"out of range"),
    (lambda t: t[1].update(id=3), r"s-7: word ids must be 1\.\.n in order"),
    (lambda t: t[0].update(id=0), r"word ids must be 1\.\.n"),
    (lambda t: t[0].update(id="1"), r"invalid id"),
    (lambda t: t.insert(2, {"id": (1, "-", 2), "form": "x"}), r"multiword token 1-2 must come"),
    (lambda t: t.insert(0, {"id": (1, "-", 5), "form": "x"}), r"ends after the last word"),
    (lambda t: t.insert(0, {"id": (2, ".", 1), "form": "x"}), r"empty node 2\.1 must come"),
    (lambda t: t[1].update(head=2), r"word 2 is its own head"),
    (lambda t: (t[0].update(head=2), t[1].update(head=1)), r"cycle"),
    (lambda t: (t[1].update(head=3), t[2].update(head=2)), r"cycle through word 2"),
    (lambda t: t[0].update(form="a\tb"), r"contains a tab"),
    (lambda t: t[0].update(lemma=""), r"LEMMA is empty"),
    (lambda t: t.clear(), r"no words"),
])
def test_invalid_token_lists(conllu, adapters, edit, message):
    t = _tokenlist(conllu, [2, 0, 2])
    adapters.from_tokenlist(t)  # valid as built
    edit(t)
    if not t.metadata:
        t.metadata["sent_id"] = "s-7"
    with pytest.raises(ArborealError, match=message):
        adapters.from_tokenlist(t)


def test_error_without_sent_id_names_position_and_trees_optional(conllu, adapters):
    good = _tokenlist(conllu, [2, 0, 2])
    bad = _tokenlist(conllu, [2, 3, 1])
    del bad.metadata["sent_id"]
    with pytest.raises(ArborealError, match=r"^sentence 2: the heads form a cycle"):
        adapters.from_tokenlists([good, bad])
    s = adapters.from_tokenlist(bad, check_trees=False)
    assert s.heads.tolist() == [-1, 2, 3, 1]


# ---------------------------------------------------------------------------- spaCy


@pytest.fixture(scope="module")
def model_path(small_trained):
    return small_trained / "m.npz"


@pytest.fixture(scope="module")
def model(model_path):
    from arboreal.models import load_model

    m = load_model(model_path)
    assert m.tagger is not None and m.tokenizer is not None
    return m


@pytest.fixture(scope="module")
def spacy_mod():
    spacy = pytest.importorskip("spacy")
    importlib.import_module("arboreal.integrations.spacy")  # registers the factory

    return spacy


@pytest.fixture(scope="module")
def nlp(spacy_mod, model_path):
    nlp = spacy_mod.blank("en")
    nlp.add_pipe("arboreal", config={"model": str(model_path)})
    return nlp


def _texts() -> list[str]:
    sents = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")
    texts = [c.split("=", 1)[1].strip() for s in sents[:30] for c in s.comments
             if c.startswith("# text =")]
    return [
        texts[0],
        " ".join(texts[1:4]),
        texts[4] + "\n\n" + texts[5],
        "  " + texts[6] + "   " + texts[7] + " \n ",
        " ".join(texts[8:12]),
        texts[12],
    ]


def _tree(doc) -> list[tuple]:
    return [(t.i, t.head.i, t.dep_, t.pos_, t.tag_, t.lemma_, str(t.morph), t.is_sent_start)
            for t in doc]


def test_spacy_trees_are_valid(nlp, model):
    labels = set(model.labeler.labels.tolist())
    for doc in map(nlp, _texts()):
        assert doc.has_annotation("DEP")
        for sent in doc.sents:
            roots = [t for t in sent if t.head.i == t.i]
            assert len(roots) == 1 and roots[0].dep_ == "root" and not roots[0].is_space
            for t in sent:
                assert sent.start <= t.head.i < sent.end
                if t.is_space:
                    assert t.dep_ == "dep" and not t.head.is_space
                else:
                    assert t.dep_ in labels
    assert set(nlp.get_pipe("arboreal").labels) == labels  # known once the model is loaded


def test_spacy_equals_model_parse(nlp, model):
    for doc in map(nlp, _texts()):
        sents = [[t for t in s if not t.is_space] for s in doc.sents]
        assert len(sents) >= 1
        parsed = model.parse_tokens([[t.text for t in words] for words in sents])
        for words, p in zip(sents, parsed):
            index = {t.i: m for m, t in enumerate(words, 1)}
            heads = [0 if t.head.i == t.i else index[t.head.i] for t in words]
            assert heads == p.heads[1:].tolist()
            assert [t.dep_ for t in words] == p.deprels[1:].tolist()
            assert [t.tag_ for t in words] == p.xpos[1:].tolist()
            assert [t.lemma_ for t in words] == p.lemmas[1:].tolist()
            assert [t.pos_ for t in words] == p.upos[1:].tolist()
            assert [str(t.morph) or "_" for t in words] == p.feats[1:].tolist()


def test_sentences_from_the_model_splitter(nlp):
    # blank("en") sets no boundaries: the model's splitter cuts the three-sentence doc,
    # and a blank line always ends a sentence
    docs = list(map(nlp, _texts()))
    assert len(list(docs[1].sents)) >= 2
    assert len(list(docs[2].sents)) >= 2
    # whitespace ends the sentence before it: only the doc's leading spaces start one
    sents = list(docs[3].sents)
    assert sents[0][0].is_space and not any(s[0].is_space for s in sents[1:])


def test_pipe_equals_call(nlp):
    texts = _texts() * 2
    one = [_tree(nlp(t)) for t in texts]
    assert [_tree(d) for d in nlp.pipe(texts, batch_size=4)] == one
    assert [_tree(d) for d in nlp.pipe(texts, batch_size=100)] == one


def test_whitespace_tokens(nlp):
    doc = nlp("  Hello  world.\n\nIt rains .  ")
    space = [t for t in doc if t.is_space]
    assert len(space) >= 3
    for t in space:
        assert t.dep_ == "dep" and not t.head.is_space
        if t.i > 0 and any(not x.is_space for x in doc[: t.i]):
            assert t.head.i == max(x.i for x in doc[: t.i] if not x.is_space)
        else:
            assert t.head.i == min(x.i for x in doc if not x.is_space)
    blank = nlp("   \n  ")
    assert not blank.has_annotation("DEP")


def test_existing_sentences_and_tags(spacy_mod, model_path, model):
    from spacy.tokens import Doc

    nlp = spacy_mod.blank("en")
    comp = nlp.add_pipe("arboreal", config={"model": str(model_path)})
    words = ["I", "saw", "a", "dog", ".", "It", "ran", "."]
    pos = ["PRON", "VERB", "DET", "NOUN", "PUNCT", "PRON", "VERB", "PUNCT"]
    starts = [True, False, False, False, False, True, False, False]
    doc = comp(Doc(nlp.vocab, words=words, pos=pos, sent_starts=starts))
    assert [t.pos_ for t in doc] == pos                       # kept
    assert [s.start for s in doc.sents] == [0, 5]             # the doc's sentences
    assert all(t.tag_ for t in doc)                           # filled by the tagger
    from arboreal.io.sentence import Sentence

    expected = model.parse([Sentence.from_columns(words[:5], upos=pos[:5]),
                            Sentence.from_columns(words[5:], upos=pos[5:])])
    got = [0 if t.head == t else t.head.i - s.start + 1 for s in doc.sents for t in s]
    assert got == expected[0].heads[1:].tolist() + expected[1].heads[1:].tolist()

    over = spacy_mod.blank("en")
    comp2 = over.add_pipe("arboreal", config={"model": str(model_path), "overwrite_tags": True})
    doc2 = comp2(Doc(over.vocab, words=words, pos=["X"] * 8, sent_starts=starts))
    tagged = model.parse_tokens([words[:5], words[5:]])
    assert [t.pos_ for t in doc2] == tagged[0].upos[1:].tolist() + tagged[1].upos[1:].tolist()


def test_use_sentences_none_and_doc(spacy_mod, model_path):
    text = " ".join(_texts()[1:2])
    nlp = spacy_mod.blank("en")
    nlp.add_pipe("arboreal", config={"model": str(model_path), "use_sentences": "none"})
    doc = nlp(text)
    assert len(list(doc.sents)) == 1
    nlp2 = spacy_mod.blank("en")
    nlp2.add_pipe("sentencizer")
    nlp2.add_pipe("arboreal", config={"model": str(model_path), "use_sentences": "doc"})
    ref = spacy_mod.blank("en")
    ref.add_pipe("sentencizer")
    assert [s.start for s in nlp2(text).sents] == [s.start for s in ref(text).sents]


def test_factory_found_through_the_entry_point(spacy_mod, model_path, tmp_path):
    # the entry point the pyproject declares, on a stand-in distribution: spacy.blank
    # imports the module itself, with no import of arboreal.integrations.spacy
    info = tmp_path / "arboreal_probe-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: arboreal-probe\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[spacy_factories]\narboreal = arboreal.integrations.spacy:make_arboreal\n")
    code = ("import spacy; nlp = spacy.blank('en'); "
            f"nlp.add_pipe('arboreal', config={{'model': {str(model_path)!r}}}); "
            "doc = nlp('The cat sat. It slept.'); "
            "print(sum(t.dep_ == 'root' for t in doc))")
    env = {**__import__("os").environ, "PYTHONPATH": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout.strip()) >= 1


def test_bad_settings(spacy_mod, model_path):
    nlp = spacy_mod.blank("en")
    with pytest.raises(ArborealError, match="use_sentences must be one of"):
        nlp.add_pipe("arboreal", config={"model": str(model_path), "use_sentences": "bogus"})
    nlp = spacy_mod.blank("en")
    nlp.add_pipe("arboreal")
    with pytest.raises(ArborealError, match="has no arboreal model"):
        nlp("A test.")
    nlp = spacy_mod.blank("en")
    nlp.add_pipe("arboreal", config={"model": str(model_path) + ".missing"})
    with pytest.raises(ArborealError, match="no such model file"):
        nlp("A test.")


def test_to_disk_from_disk(spacy_mod, model_path, tmp_path):
    own = tmp_path / "own.npz"
    shutil.copyfile(model_path, own)
    nlp = spacy_mod.blank("en")
    nlp.add_pipe("arboreal", config={"model": str(own)})
    texts = _texts()
    before = [_tree(nlp(t)) for t in texts]
    nlp.to_disk(tmp_path / "pipeline")
    assert (tmp_path / "pipeline" / "arboreal" / "model.npz").exists()
    own.unlink()  # the saved pipeline must not need the original file
    loaded = spacy_mod.load(tmp_path / "pipeline")
    assert [_tree(loaded(t)) for t in texts] == before
    # and bytes
    data = loaded.to_bytes()
    again = spacy_mod.blank("en")
    again.add_pipe("arboreal")
    again.from_bytes(data)
    assert [_tree(again(t)) for t in texts] == before
    # a component never used is saved by copying its file
    fresh = spacy_mod.blank("en")
    fresh.add_pipe("arboreal", config={"model": str(model_path)})
    fresh.to_disk(tmp_path / "p2")
    assert (tmp_path / "p2" / "arboreal" / "model.npz").read_bytes() == model_path.read_bytes()


# ---------------------------------------------------------------------------- spaCy: scores


def _reference_docs(vocab, per_doc: int = 10, docs: int = 3) -> list:
    """Gold spaCy docs of the sample test set's first sentences: words, spaces, UD heads
    and relations, UPOS, XPOS, lemmas, FEATS and sentence starts."""
    from spacy.tokens import Doc

    sents = read_conllu(SAMPLE / "en_ewt-sample-test.conllu")[:per_doc * docs]
    out = []
    for k in range(docs):
        words, spaces, heads, deps, pos, tags, lemmas, morphs, starts = ([] for _ in range(9))
        for s in sents[k * per_doc:(k + 1) * per_doc]:
            base = len(words)
            n = len(s)
            for m in range(1, n + 1):
                words.append(str(s.forms[m]))
                spaces.append("SpaceAfter=No" not in str(s.misc[m]) and m < n)
                if m == n:
                    spaces[-1] = True
                h = int(s.heads[m])
                heads.append(base + (m if h == 0 else h) - 1)
                deps.append(str(s.deprels[m]))
                pos.append(str(s.upos[m]))
                tags.append(str(s.xpos[m]))
                lemmas.append(str(s.lemmas[m]))
                morphs.append("" if s.feats[m] == "_" else str(s.feats[m]))
                starts.append(m == 1)
        out.append(Doc(vocab, words=words, spaces=spaces, heads=heads, deps=deps, pos=pos,
                       tags=tags, lemmas=lemmas, morphs=morphs, sent_starts=starts))
    return out


def _fraction(hits: int, total: int) -> float:
    return hits / total


def test_nlp_evaluate_reports_dependency_tag_and_sentence_scores(nlp):
    from spacy.tokens import Doc
    from spacy.training import Example

    refs = _reference_docs(nlp.vocab)
    same = [Example(Doc(nlp.vocab, words=[t.text for t in r], spaces=[bool(t.whitespace_) for t in r]), r)
            for r in refs]
    scores = nlp.evaluate(same, scorer_cfg={"ignore_labels": ()})
    for key in ("dep_uas", "dep_las", "pos_acc", "tag_acc", "lemma_acc", "morph_acc", "sents_f"):
        assert isinstance(scores[key], float), (key, scores.get(key))

    # the same tokens as gold: every score is a plain count over the words, worked out
    # here from docs the component parses again (it is deterministic)
    parsed = [nlp(Doc(nlp.vocab, words=[t.text for t in r], spaces=[bool(t.whitespace_) for t in r]))
              for r in refs]
    pairs = [(p, g) for pd, rd in zip(parsed, refs) for p, g in zip(pd, rd)]
    n = len(pairs)
    assert scores["dep_uas"] == pytest.approx(_fraction(sum(p.head.i == g.head.i for p, g in pairs), n))
    assert scores["dep_las"] == pytest.approx(_fraction(
        sum(p.head.i == g.head.i and p.dep_.lower() == g.dep_.lower() for p, g in pairs), n))
    assert scores["pos_acc"] == pytest.approx(_fraction(sum(p.pos_ == g.pos_ for p, g in pairs), n))
    assert scores["tag_acc"] == pytest.approx(_fraction(sum(p.tag_ == g.tag_ for p, g in pairs), n))
    assert scores["lemma_acc"] == pytest.approx(_fraction(sum(p.lemma_ == g.lemma_ for p, g in pairs), n))
    spans = lambda docs: {(k, s.start, s.end) for k, d in enumerate(docs) for s in d.sents}  # noqa: E731
    found, gold = spans(parsed), spans(refs)
    right = len(found & gold)
    assert scores["sents_p"] == pytest.approx(right / len(found))
    assert scores["sents_r"] == pytest.approx(right / len(gold))
    assert 0 < scores["dep_las"] < scores["dep_uas"] < 1

    # spaCy's convention by default: punctuation is not scored
    default = nlp.evaluate(same)
    kept = [(p, g) for p, g in pairs if g.dep_ != "punct"]
    las = sum(p.head.i == g.head.i and p.dep_ == g.dep_ for p, g in kept if p.dep_ != "punct")
    predicted = sum(p.dep_ != "punct" for p, _ in pairs)
    assert default["dep_las"] == pytest.approx(2 * las / (len(kept) + predicted))

    # spaCy's own tokenization of the text, aligned to gold's words by spaCy
    own = [Example(nlp.make_doc(r.text), r) for r in refs]
    aligned = nlp.evaluate(own)
    assert 0 < aligned["dep_las"] <= aligned["dep_uas"] < 1 and 0 < aligned["sents_f"] <= 1


# ---------------------------------------------------------------------------- spaCy: noun chunks


def _ud_doc(vocab, rows: str):
    """A doc from "form UPOS head deprel" lines (heads 1-based, 0 the root)."""
    from spacy.tokens import Doc

    table = [line.split() for line in rows.strip().splitlines()]
    return Doc(vocab, words=[r[0] for r in table], pos=[r[1] for r in table],
               heads=[int(r[2]) - 1 if r[2] != "0" else i for i, r in enumerate(table)],
               deps=[r[3] for r in table])


UD_SENTENCES = [
    ("""The DET 3 det
        big ADJ 3 amod
        cat NOUN 4 nsubj
        sat VERB 0 root
        on ADP 7 case
        the DET 7 det
        mat NOUN 4 obl
        near ADP 11 case
        the DET 11 det
        old ADJ 11 amod
        house NOUN 7 nmod
        . PUNCT 4 punct""", ["The big cat", "the mat", "the old house"], ["The big cat"]),
    ("""She PRON 5 nsubj
        and CCONJ 4 cc
        her PRON 4 nmod:poss
        brother NOUN 1 conj
        like VERB 0 root
        cats NOUN 5 obj""", ["She", "her brother", "cats"], ["She", "and her brother"]),
    ("""It PRON 5 nsubj
        is AUX 5 cop
        a DET 5 det
        good ADJ 5 amod
        idea NOUN 0 root""", ["It", "a good idea"], ["It"]),
]


@pytest.mark.parametrize("rows, ours, english", UD_SENTENCES)
def test_ud_noun_chunks_on_hand_parsed_sentences(spacy_mod, rows, ours, english):
    from arboreal.integrations.spacy import ud_noun_chunks

    nlp = spacy_mod.blank("en")
    doc = _ud_doc(nlp.vocab, rows)
    # spaCy's English iterator reads ClearNLP labels (dobj, pobj, attr...): it misses
    # UD's obl, nmod, obj and a nominal root, and takes in the cc of a conjunct
    assert [c.text for c in doc.noun_chunks] == english
    doc.noun_chunks_iterator = ud_noun_chunks
    assert [c.text for c in doc.noun_chunks] == ours
    assert all(c.label_ == "NP" for c in doc.noun_chunks)
    assert [c.text for c in doc[1:].noun_chunks] == [x for x in ours if x != ours[0]]


def test_component_installs_the_ud_noun_chunks_where_spacy_expects_other_labels(spacy_mod, model_path):
    from arboreal.integrations.spacy import ud_noun_chunks

    nlp = spacy_mod.blank("en")
    english = nlp.vocab.get_noun_chunks
    nlp.add_pipe("arboreal", config={"model": str(model_path)})
    assert nlp.vocab.get_noun_chunks is ud_noun_chunks
    text = " ".join(_texts()[:5])
    doc = nlp(text)
    chunks = list(doc.noun_chunks)
    assert chunks and all(c.root.pos_ in ("NOUN", "PROPN", "PRON") and c[-1] == c.root
                          for c in chunks)
    doc.noun_chunks_iterator = english
    assert len(chunks) > len(list(doc.noun_chunks))
    # spaCy's own iterator kept on request, and for a language whose iterator reads UD
    keep = spacy_mod.blank("en")
    keep.add_pipe("arboreal", config={"model": str(model_path), "noun_chunks": "spacy"})
    assert keep.vocab.get_noun_chunks is english
    spanish = spacy_mod.blank("es")
    own = spanish.vocab.get_noun_chunks
    spanish.add_pipe("arboreal", config={"model": str(model_path)})
    assert own is not None and spanish.vocab.get_noun_chunks is own
    with pytest.raises(ArborealError, match="noun_chunks must be one of"):
        spacy_mod.blank("en").add_pipe("arboreal", config={"model": str(model_path),
                                                           "noun_chunks": "bogus"})
