"""The tokenizer and sentence splitter: training from '# text' lines, multiword tokens,
raw text through ``arboreal parse --input text`` and the Python API, hostile text."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from arboreal.cli import main
from arboreal.errors import ArborealError
from arboreal.io.conllu import format_conllu, read_conllu, write_conllu
from arboreal.models.tokenizer import (MAX_SENTENCE_TOKENS, SENTENCE_END, Tokenizer,
                                       training_paragraphs)

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


@pytest.fixture(scope="module")
def sample():
    return (read_conllu(SAMPLE / "en_ewt-sample-train.conllu"),
            read_conllu(SAMPLE / "en_ewt-sample-test.conllu"))


@pytest.fixture(scope="module")
def tokenizer(sample):
    return Tokenizer.train(sample[0], epochs=5)


def surface(s):
    """The surface tokens of a sentence: multiword tokens once, as written."""
    ranges = {}
    for _, line in s.extra:
        ident, form = line.split("\t")[:2]
        if "-" in ident:
            a, b = map(int, ident.split("-"))
            ranges[a] = (b, form)
    out, i = [], 1
    while i <= len(s):
        if i in ranges:
            out.append(ranges[i][1])
            i = ranges[i][0] + 1
        else:
            out.append(s.forms[i])
            i += 1
    return out


def test_training_paragraphs_label_every_token_end(sample):
    train, _ = sample
    paragraphs, skipped = training_paragraphs(train)
    assert skipped == 0
    assert sum(int((lab == SENTENCE_END).sum()) for _, lab in paragraphs) == len(train)
    n_tokens = sum(len(surface(s)) for s in train)
    assert sum(int((lab > 0).sum()) for _, lab in paragraphs) == n_tokens
    # paragraphs are the sentences' texts, in order, without the whitespace
    joined = "".join(t for t, _ in paragraphs)
    texts = "".join(c.split("=", 1)[1] for s in train for c in s.comments
                    if c.startswith("# text ="))
    assert re.sub(r"\s", "", joined) == re.sub(r"\s", "", texts)
    for text, lab in paragraphs:      # a boundary never sits on whitespace
        assert not any(text[i].isspace() for i in np.flatnonzero(lab))


def test_tokenizer_recovers_the_test_tokens_and_sentences(sample, tokenizer):
    _, test = sample
    paragraphs, _ = training_paragraphs(test)
    got = list(tokenizer.tokenize([t for t, _ in paragraphs]))
    gold_tokens = [t for s in test for t in surface(s)]
    got_tokens = [t for s in got for t in surface(s)]
    # the characters are all there, in order
    assert "".join(got_tokens) == "".join(gold_tokens)
    # token boundaries: F1 of (start, end) character spans without whitespace
    def spans(tokens):
        out, pos = set(), 0
        for t in tokens:
            out.add((pos, pos + len(t)))
            pos += len(t)
        return out
    g, p = spans(gold_tokens), spans(got_tokens)
    f1 = 2 * len(g & p) / (len(g) + len(p))
    assert f1 > 0.97            # measured on this sample: about 0.99
    assert abs(len(got) - len(test)) < 0.2 * len(test)


def surface_with_misc(s):
    """(surface form, MISC) of each surface token (a multiword token's MISC is on its
    range line)."""
    ranges = {}
    for _, line in s.extra:
        f = line.split("\t")
        a, sep, b = f[0].partition("-")
        if sep:
            ranges[int(a)] = (int(b), f[1], f[9])
    out, i = [], 1
    while i <= len(s):
        if i in ranges:
            b, form, misc = ranges[i]
            out.append((form, misc))
            i = b + 1
        else:
            out.append((s.forms[i], s.misc[i]))
            i += 1
    return out


def test_output_text_round_trips(tokenizer):
    import io

    text = 'He said: "I don\'t know."  Then (at 5:30pm) he left.\nShe stayed, didn\'t she?'
    sents = list(tokenizer.tokenize([text]))
    rebuilt = "".join(form + ("" if "SpaceAfter=No" in misc else " ")
                      for s in sents for form, misc in surface_with_misc(s))
    assert rebuilt.strip() == " ".join(text.split())
    # the output is valid CoNLL-U, multiword ranges included
    back = read_conllu(io.BytesIO(format_conllu(sents).encode()), allow_missing_heads=True)
    assert [b.forms.tolist() for b in back] == [s.forms.tolist() for s in sents]


def _spanish(tmp_path):
    """A treebank of one Spanish sentence with two multiword tokens (del, al), 30 times."""
    lines = []
    for k in range(30):
        lines += [f"# sent_id = {k}", "# text = Vino del norte al pueblo.",
                  "1\tVino\tvenir\tVERB\t_\t_\t0\troot\t_\t_",
                  "2-3\tdel\t_\t_\t_\t_\t_\t_\t_\t_",
                  "2\tde\tde\tADP\t_\t_\t4\tcase\t_\t_",
                  "3\tel\tel\tDET\t_\t_\t4\tdet\t_\t_",
                  "4\tnorte\tnorte\tNOUN\t_\t_\t1\tobl\t_\t_",
                  "5-6\tal\t_\t_\t_\t_\t_\t_\t_\t_",
                  "5\ta\ta\tADP\t_\t_\t7\tcase\t_\t_",
                  "6\tel\tel\tDET\t_\t_\t7\tdet\t_\t_",
                  "7\tpueblo\tpueblo\tNOUN\t_\t_\t1\tobl\t_\tSpaceAfter=No",
                  "8\t.\t.\tPUNCT\t_\t_\t1\tpunct\t_\t_", ""]
    path = tmp_path / "es.conllu"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_multiword_tokens_are_expanded_with_their_casing(tmp_path):
    tok = Tokenizer.train(read_conllu(_spanish(tmp_path)), epochs=3)
    [s] = list(tok.tokenize(["Del norte vino al pueblo."]))
    assert s.forms[1:].tolist() == ["De", "el", "norte", "vino", "a", "el", "pueblo", "."]
    assert [line.split("\t")[:2] for _, line in s.extra] == [["1-2", "Del"], ["5-6", "al"]]
    assert s.misc[7] == "SpaceAfter=No"
    # written and read back as CoNLL-U: ranges and words intact
    out = tmp_path / "out.conllu"
    write_conllu([s], out)
    back = read_conllu(out, allow_missing_heads=True)
    assert back[0].forms.tolist() == s.forms.tolist()


def test_tokenized_input_expands_multiword_tokens_and_words_input_does_not(tmp_path):
    """--input tokenized: each token expanded as in raw text (Spanish *del* -> *de el*,
    with its range line), through iter_input and through `arboreal parse`; --input words:
    the tokens are the words; a tokenizer that learned no multiword token changes
    nothing."""
    from arboreal.cli import main
    from arboreal.io.text import iter_input

    treebank = _spanish(tmp_path)
    given = tmp_path / "in.txt"
    given.write_text("Del norte vino al pueblo .\nvino el norte\n", encoding="utf-8")
    tok = Tokenizer.train(read_conllu(treebank), epochs=3)
    first, second = iter_input(given, "tokenized", tok)
    assert first.forms[1:].tolist() == ["De", "el", "norte", "vino", "a", "el", "pueblo", "."]
    assert [line.split("\t")[:2] for _, line in first.extra] == [["1-2", "Del"], ["5-6", "al"]]
    assert first.comments == ["# sent_id = 1", "# text = Del norte vino al pueblo ."]
    assert first.line == 1 and second.line == 2
    assert second.forms[1:].tolist() == ["vino", "el", "norte"] and not second.extra
    words = list(iter_input(given, "words", tok))
    assert words[0].forms[1:].tolist() == ["Del", "norte", "vino", "al", "pueblo", "."]
    assert not words[0].extra

    plain = tmp_path / "plain.conllu"
    plain.write_text("".join(  # the same words, each its own token
        ("# text = Vino de el norte a el pueblo." if line.startswith("# text") else line)
        + "\n" for line in treebank.read_text().splitlines()
        if "-" not in line.split("\t")[0] or line.startswith("#")), encoding="utf-8")
    unexpanded = Tokenizer.train(read_conllu(plain), epochs=1)
    assert [s.forms.tolist() for s in iter_input(given, "tokenized", unexpanded)] == \
        [s.forms.tolist() for s in words]

    model, out = tmp_path / "es.model", tmp_path / "out.conllu"
    assert main(["train", str(treebank), "-o", str(model), "--epochs", "1", "--tagger-epochs",
                 "1", "--hash-bits", "14", "--jackknife", "2", "--quiet"]) == 0
    for fmt, forms, ranges in (("tokenized", first.forms, 2), ("words", words[0].forms, 0)):
        assert main(["parse", str(model), str(given), "--input", fmt, "-o", str(out),
                     "--quiet"]) == 0
        parsed = read_conllu(out)
        assert parsed[0].forms.tolist() == forms.tolist() and len(parsed[0].extra) == ranges
        assert len(parsed) == 2


def _treebank(tmp_path, sentences):
    """A CoNLL-U file of (text, [(form, SpaceAfter=No?)...]) sentences, each a paragraph."""
    lines = []
    for k, (text, tokens) in enumerate(sentences):
        lines += ["# newpar", f"# sent_id = {k}", f"# text = {text}"]
        for i, (form, glued) in enumerate(tokens, 1):
            lines.append(f"{i}\t{form}\t_\tX\t_\t_\t{0 if i == 1 else 1}\t"
                         f"{'root' if i == 1 else 'dep'}\t_\t{'SpaceAfter=No' if glued else '_'}")
        lines.append("")
    path = tmp_path / "t.conllu"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return read_conllu(path)


def test_urls_emails_and_emoticons_stay_one_token(tmp_path, sample):
    """Spans that UD keeps whole in every language (URLs, e-mail addresses, file names,
    emoticons) are one token with the punctuation around them split off, also for
    forms that training never saw, when training kept such spans whole."""
    seen = [("See http://a-b.org/x-y.html.", [("See", 0), ("http://a-b.org/x-y.html", 1),
                                                (".", 0)]),
            ("Mail <jo-e@x.com> :-)", [("Mail", 0), ("<", 1), ("jo-e@x.com", 1), (">", 0),
                                       (":-)", 0)])] * 6
    tok = Tokenizer.train(list(sample[0][:200]) + _treebank(tmp_path, seen), epochs=3)
    assert tok.one_token_rule
    [s] = list(tok.tokenize(["Try (www.new-site.co.uk/a_b-c) or <ann.lee@mail-host.net> :) now"]))
    assert surface(s) == ["Try", "(", "www.new-site.co.uk/a_b-c", ")", "or", "<",
                          "ann.lee@mail-host.net", ">", ":)", "now"]
    # a treebank that splits such spans gets no rule
    split = [("See www.ab.org", [("See", 0), ("www", 1), (".", 1), ("ab.org", 0)])] * 12
    assert not Tokenizer.train(_treebank(tmp_path, split), epochs=1).one_token_rule


def test_tokenizer_of_older_features_is_refused(model, tmp_path, capsys):
    """A model whose tokenizer was trained on other character features is refused with
    a one-line error naming the field, not used to mis-tokenize."""
    from arboreal.io.model_file import load_model_file, save_model_file

    meta, arrays = load_model_file(model)
    del meta["tokenizer"]["attributes_version"]
    old = tmp_path / "old.model"
    save_model_file(old, meta, {k: arrays[k] for k in arrays})
    src = tmp_path / "in.txt"
    src.write_text("Dogs bark.\n", encoding="utf-8")
    assert main(["parse", str(old), str(src), "--input", "text"]) == 2
    err = capsys.readouterr().err
    assert "attributes_version" in err and "retrain" in err


def test_tokenizer_without_text_lines_is_an_error(sample):
    train, _ = sample
    stripped = [type(s)(**{**s.__dict__, "comments": []}) for s in train[:20]]
    with pytest.raises(ArborealError, match="# text"):
        Tokenizer.train(stripped)


def test_text_without_sentence_ends_is_cut(tokenizer):
    text = " ".join(["word"] * (3 * MAX_SENTENCE_TOKENS + 5))
    sents = list(tokenizer.tokenize([text]))
    assert [len(s) for s in sents] == [MAX_SENTENCE_TOKENS] * 3 + [5]


def test_odd_text_gives_sentences(tokenizer):
    text = "Ж ж mixed Ελληνικά 中文字 ٣٤ 🙂🙂 ...!!! a\tb\u00a0c \u200b x"
    sents = list(tokenizer.tokenize([text]))
    words = "".join(t for s in sents for t in surface(s))
    assert words == re.sub(r"\s", "", text)


def test_a_long_run_without_spaces_is_tokenized(tokenizer):
    """Text without whitespace for tens of thousands of characters (base64, minified
    data) is tokenized in time linear in its length, its characters all kept."""
    blob = "aB3+/x" * 10_000 + "@example.com"
    sents = list(tokenizer.tokenize([f"Data: {blob} end."]))
    assert "".join(t for s in sents for t in surface(s)) == f"Data:{blob}end."


# ---------------------------------------------------------------- the command line
@pytest.fixture(scope="module")
def model(tmp_path_factory, sample):
    d = tmp_path_factory.mktemp("tok")
    write_conllu(sample[0][:300], d / "train.conllu")
    path = d / "m.model"
    assert main(["train", str(d / "train.conllu"), "-o", str(path), "--epochs", "2",
                 "--tagger-epochs", "2", "--hash-bits", "18", "--quiet"]) == 0
    assert main(["train", str(d / "train.conllu"), "-o", str(d / "notok.model"), "--epochs",
                 "1", "--tagger-epochs", "1", "--hash-bits", "16", "--no-tokenizer",
                 "--quiet"]) == 0
    return path


def test_parse_raw_text(model, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("This is one. And this is two.\n\nA new paragraph.\n", encoding="utf-8")
    out = tmp_path / "out.conllu"
    assert main(["parse", str(model), str(src), "--input", "text", "-o", str(out)]) == 0
    parsed = read_conllu(out)
    assert all(s.has_heads for s in parsed) and len(parsed) >= 2
    assert "# newpar" in parsed[0].comments
    assert "".join(t for s in parsed for t in s.forms[1:]) == "Thisisone.Andthisistwo.Anewparagraph."
    assert all(s.upos[1] != "_" for s in parsed)


def test_tag_raw_text(model, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("Dogs bark.\n", encoding="utf-8")
    assert main(["tag", str(model), str(src), "--input", "text"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()
            if line and line[0].isdigit()]
    assert "".join(r[1] for r in rows) == "Dogsbark."
    # tags and lemmas filled, no tree
    assert all(r[3] != "_" and r[2] != "_" and r[6] == "_" for r in rows)


@pytest.mark.parametrize("content,message", [
    (b"", "empty input"),
    (b"\n\n  \n", "empty input"),
    (b"fine\n\x01bad\n", ":2: control character U+0001"),
    (b"\xff\n", ":1: invalid UTF-8"),
])
def test_bad_text_is_one_line_error(model, tmp_path, capsys, content, message):
    src = tmp_path / "bad.txt"
    src.write_bytes(content)
    out = tmp_path / "out.conllu"
    assert main(["parse", str(model), str(src), "--input", "text", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and not out.exists()


def test_model_without_tokenizer_refuses_text(model, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("Some text.\n", encoding="utf-8")
    assert main(["parse", str(model.parent / "notok.model"), str(src), "--input", "text"]) == 2
    assert "no tokenizer" in capsys.readouterr().err


def test_python_api(model):
    import arboreal

    m = arboreal.load(str(model))
    parsed = m.parse_text("The cat sat. It slept.")
    assert "".join(t for s in parsed for t in s.forms[1:]) == "Thecatsat.Itslept."
    assert all(s.has_heads for s in parsed) and len(parsed[0]) >= 3
    [s] = m.parse_tokens([["The", "cat", "sat"]])
    assert s.forms[1:].tolist() == ["The", "cat", "sat"] and s.has_heads
    assert s.upos[1] != "_"


def test_paragraphs_are_blocks_between_blank_lines(tmp_path):
    from arboreal.io.text import iter_paragraphs, paragraphs_of

    text = "First line\nsecond line.\n\n\n  \nNext paragraph.\n \t\nLast one\n"
    expected = ["First line\nsecond line.", "Next paragraph.", "Last one"]
    assert paragraphs_of(text) == expected
    src = tmp_path / "p.txt"
    src.write_text(text, encoding="utf-8")
    assert list(iter_paragraphs(str(src))) == expected
    src.write_bytes(text.replace("\n", "\r\n").encode())     # CRLF line ends
    assert list(iter_paragraphs(str(src))) == expected


def test_overlong_lines_and_paragraphs_are_errors(tmp_path, monkeypatch):
    import arboreal.io.text as text_io
    from arboreal.errors import FormatError

    monkeypatch.setattr(text_io, "MAX_SENTENCE_BYTES", 100)
    src = tmp_path / "long.txt"
    src.write_text("short\n" + "x" * 150 + "\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"long.txt:2: line longer than"):
        list(text_io.iter_paragraphs(str(src)))
    with pytest.raises(FormatError, match=r"long.txt:2: line longer than"):
        list(text_io.iter_tokenized(str(src)))
    src.write_text("\n".join(["word " * 10] * 5) + "\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"long.txt:\d: paragraph longer than"):
        list(text_io.iter_paragraphs(str(src)))
    assert len(list(text_io.iter_tokenized(str(src)))) == 5   # lines are sentences


def test_character_rows_do_not_depend_on_the_hash_caches(tokenizer, sample):
    """The rows of a text are the same whatever the caches hold: a tiny cache (cleared
    over and over) gives the rows of a fresh large one, which gives them again on a
    second pass (all from the cache)."""
    from arboreal.features.characters import CharacterAttributes

    attrs = next(v for v in vars(tokenizer).values() if isinstance(v, CharacterAttributes))
    text = " ".join(" ".join(s.forms[1:].tolist()) for s in sample[1][:40])
    text += " İstanbul 東京都に住む 🙂x ٣٤٥ " + "a" * 200 + " http://example.org/" + "b" * 90
    fresh = CharacterAttributes(attrs.tokens, attrs.segmentations)
    first = fresh.rows(text)
    assert (fresh.rows(text) == first).all()
    tiny = CharacterAttributes(attrs.tokens, attrs.segmentations, max_cache=3)
    assert (tiny.rows(text) == first).all()
    assert len(tiny._hashes) <= 3 and len(tiny._chunks) <= 3


@pytest.mark.parametrize("form,shape", [("McDonald", "XxXx"), ("1,000", "d,d"),
                                         ("東京", "a"), ("e-mail!!", "x-x!"),
                                         ("AbCdEfGhIj", "XxX~Xx")])
def test_word_shape(form, shape):
    from arboreal.features.tokens import word_shape

    assert word_shape(form) == shape


def _bound_groups(tmp_path, stems, mwt=True):
    """A treebank whose tokens bind the prefixes 'ne' and 't' to a stem as one
    multiword token ('netsotam' = ne t sotam), beside plain stems; with ``mwt`` False
    the same text with no multiword token."""
    lines = []
    for k, (a, b) in enumerate(zip(stems, stems[1:] + stems[:1])):
        text = f"ne{a} t{b} {b}."
        lines += ["# newpar", f"# sent_id = {k}", f"# text = {text}"]
        if mwt:
            lines += [f"1-2\tne{a}\t_\t_\t_\t_\t_\t_\t_\t_",
                      "1\tne\t_\tAUX\t_\t_\t2\taux\t_\t_", f"2\t{a}\t_\tVERB\t_\t_\t0\troot\t_\t_",
                      f"3-4\tt{b}\t_\t_\t_\t_\t_\t_\t_\t_",
                      "3\tt\t_\tDET\t_\t_\t4\tdet\t_\t_", f"4\t{b}\t_\tNOUN\t_\t_\t2\tobj\t_\t_",
                      f"5\t{b}\t_\tNOUN\t_\t_\t4\tappos\t_\tSpaceAfter=No",
                      "6\t.\t_\tPUNCT\t_\t_\t2\tpunct\t_\t_", ""]
        else:
            lines += [f"1\tne{a}\t_\tVERB\t_\t_\t0\troot\t_\t_",
                      f"2\tt{b}\t_\tNOUN\t_\t_\t1\tobj\t_\t_",
                      f"3\t{b}\t_\tNOUN\t_\t_\t2\tappos\t_\tSpaceAfter=No",
                      "4\t.\t_\tPUNCT\t_\t_\t1\tpunct\t_\t_", ""]
    path = tmp_path / ("mwt.conllu" if mwt else "plain.conllu")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return read_conllu(path)


def _stems(n, seed):
    rng = np.random.default_rng(seed)
    consonants, vowels = "bdgklmprsz", "aiou"
    return sorted({"".join(rng.choice(list(consonants)) + rng.choice(list(vowels))
                           for _ in range(3)) for _ in range(n)})


def test_unseen_multiword_tokens_are_split_by_the_learned_splitter(tmp_path):
    """Forms never seen in training are cut into words where the treebank's spelled-out
    multiword tokens taught it (the prefixes), plain unseen words are left whole, and
    the splitter survives saving; a treebank without multiword tokens gets none."""
    from arboreal.models.tokenizer import MIN_SPLIT_TYPES

    stems = _stems(400, 0)
    train, unseen = stems[:300], [s for s in stems[300:] if s not in stems[:300]]
    tok = Tokenizer.train(_bound_groups(tmp_path, train), epochs=3)
    assert tok.split_weights is not None and 2 * len(train) >= MIN_SPLIT_TYPES
    text = " ".join(f"ne{u} t{u} {u}." for u in unseen[:20])
    sentences = list(tok.tokenize([text]))
    words = [w for s in sentences for w in s.forms[1:].tolist()]
    expected = [w for u in unseen[:20] for w in ("ne", u, "t", u, u, ".")]
    assert words == expected
    ranges = [line.split("\t")[:2] for s in sentences for _, line in s.extra]
    assert ranges[:2] == [["1-2", f"ne{unseen[0]}"], ["3-4", f"t{unseen[0]}"]]

    from arboreal.io.model_file import MetaFields

    meta, arrays = {}, {}
    tok.put(meta, arrays)
    back = Tokenizer.from_file_contents(MetaFields("m", meta), arrays)
    again = [w for s in back.tokenize([text]) for w in s.forms[1:].tolist()]
    assert again == expected

    plain = Tokenizer.train(_bound_groups(tmp_path, train, mwt=False), epochs=3)
    assert plain.split_weights is None
    assert all(not s.extra for s in plain.tokenize([text]))
