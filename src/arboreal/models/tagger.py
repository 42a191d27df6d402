"""The tagger: UPOS, XPOS, FEATS and LEMMA of syntactic words, trained on a treebank.

Four averaged-perceptron stages run one after another (see
:mod:`arboreal.features.tokens` for the features, :mod:`arboreal.learn.tagging` for the
learner): UPOS over all UPOS tags; then XPOS, FEATS (whole strings) and lemma *rules*,
each restricted to the classes seen with the token's predicted UPOS, with the earlier
stages' predictions as context. A lemma is looked up first (the most frequent lemma of
the form with that UPOS, and FEATS where UPOS alone is ambiguous, in training; then of
the lower-cased form, for a capitalised sentence start); unknown forms get the predicted
rule applied (:func:`~arboreal.features.lemmas.lemma_rule` /
:func:`~arboreal.features.lemmas.apply_rule`: an edit of prefix and suffix around the
longest common substring of form and lemma, after changing the case or not).
Columns that are ``_`` throughout the training data get no stage.

Each stage decodes greedily left to right or by exact first-order Viterbi (trained as a
structured perceptron; :func:`arboreal.features.tokens.viterbi_tag`), its ``decoding``,
saved in the model file. With dev data (``arboreal train --dev``) the UPOS, XPOS and
FEATS stages are trained both ways and Viterbi is kept only when it is better on dev by
a sign test at 5% (:data:`DECODING_MIN_Z`), greedy being several times faster per stage
(Viterbi: K^2 transitions per token for K candidates). On EWT the two are even on dev (greedy
kept), on Greek GDT Viterbi wins for UPOS and FEATS, on Turkish IMST greedy wins
(docs/benchmarks.md, "Tagger: greedy vs Viterbi decoding"). Lemma rules: Viterbi was
never better on dev and is the slowest stage to decode by it (up to 128 candidates):
greedy only (:data:`AUTO_DECODINGS`).

Without dev data every stage is greedy (:data:`DEFAULT_DECODING`).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from arboreal.errors import ArborealError
from arboreal.features.lemmas import (build_lemma_lookup, get_lemma_lookup, lemma_rule,
                                      lookup_lemmas, put_lemma_lookup)
from arboreal.features.tokens import (A_AMBIG, FEATURES_VERSION, MAX_CANDIDATES,
                                      MIN_AMBIGUITY_COUNT, UNKNOWN, WordAttributes, greedy_tag,
                                      normalize, stable_hash, viterbi_tag)
from arboreal.io.model_file import (MetaFields, array_shape, get_string_list,
                                           get_strings, get_weights, put_strings, put_weights)

#: stage name -> Sentence attribute, in the order the stages run
COLUMNS = {"upos": "upos", "xpos": "xpos", "feats": "feats", "lemma": "lemmas"}
#: the context stages each stage reads (those trained), the first one its condition
CONTEXT = {"upos": (), "xpos": ("upos",), "feats": ("upos", "xpos"),
           "lemma": ("upos", "feats")}
#: stages whose candidates are the classes seen with the token's (predicted) first
#: context value, its UPOS; the others choose among all their classes
CONDITIONED = ("xpos", "feats", "lemma")
DEFAULT_BITS = 22
#: a stage's decoding -> the order of its Viterbi chain (0: greedy left to right), used
#: both to train it (greedy or structured perceptron) and to tag
DECODINGS = {"greedy": 0, "viterbi": 1, "viterbi2": 2}
#: the decodings ``Tagger.train(decoding="auto")`` trains each stage with when it has
#: dev data: the first, then each other one replaces the one kept when it is better on
#: dev by more than DECODING_MIN_Z (see _gain_z). Lemma rules: greedy only (Viterbi was
#: worse or equal on dev on EWT, GDT and IMST, and much slower; module docstring)
AUTO_DECODINGS = {"upos": ("greedy", "viterbi"), "xpos": ("greedy", "viterbi"),
                  "feats": ("greedy", "viterbi"), "lemma": ("greedy",)}
#: how much better on dev a slower decoding must be to replace the faster: the one-sided
#: 5% point of the sign test on the dev tokens where exactly one of the two is right
#: (0: any gain; differences of a few tokens in 25,000 are noise, and Viterbi costs
#: a multiple of the tagging time of a stage)
DECODING_MIN_Z = 1.645
#: the decoding of each stage trained without dev data under ``decoding="auto"``
DEFAULT_DECODING = {"upos": "greedy", "xpos": "greedy", "feats": "greedy", "lemma": "greedy"}
DEFAULT_EPOCHS = 10
#: folds of the training words' ambiguity classes (see _jackknife_ambiguity; chosen on
#: EWT dev UPOS accuracy among 5, 10 and 20)
AMBIGUITY_FOLDS = 20
#: a lemma rule is a candidate of a UPOS when seen this often with it in training
MIN_RULE_COUNT = 2


@dataclass
class Stage:
    """One trained stage: ``classes`` (str), ``cand`` (U, B) int32 candidate class ids
    per condition value (UPOS id; one row when unconditioned), ``cand_n`` (U,),
    ``weights`` (2**bits + MAX_CANDIDATES,) float32, ``context`` the stages it reads,
    ``decoding`` a key of :data:`DECODINGS` (how it was trained and how it tags)."""

    name: str
    classes: np.ndarray
    cand: np.ndarray
    cand_n: np.ndarray
    weights: np.ndarray
    bits: int
    context: tuple[str, ...]
    epochs: int = 0
    dev_accuracy: float | None = None
    decoding: str = "greedy"

    @property
    def conditioned(self) -> bool:
        """Whether the candidates depend on the first context stage's value."""
        return bool(self.context) and self.name in CONDITIONED


def _candidates(gold: np.ndarray, cond: np.ndarray | None, n_cond: int, n_classes: int,
                min_count: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Classes seen with each condition value, most frequent first (at most
    MAX_CANDIDATES, those seen >= min_count times; at least the most frequent one)."""
    if cond is None:
        cond = np.zeros(len(gold), dtype=np.int64)
        n_cond = 1
    counts = np.zeros((n_cond, n_classes), dtype=np.int64)
    np.add.at(counts, (cond, gold), 1)
    overall = int(np.argmax(counts.sum(axis=0)))
    rows = []
    for u in range(n_cond):
        order = np.argsort(-counts[u], kind="stable")
        keep = order[counts[u, order] >= min_count][:MAX_CANDIDATES]
        if keep.size == 0:
            keep = order[counts[u, order] > 0][:1] if counts[u].any() else np.array([overall])
        rows.append(keep)
    width = max(len(r) for r in rows)
    cand = np.full((n_cond, width), -1, dtype=np.int32)
    cand_n = np.zeros(n_cond, dtype=np.int32)
    for u, r in enumerate(rows):
        cand[u, : len(r)] = r
        cand_n[u] = len(r)
    return cand, cand_n


class _Packed:
    """A corpus as token rows: attribute rows, sentence offsets, and per stage the class
    ids (-1 for a value the stage does not know)."""

    def __init__(self, sentences: list, attributes: WordAttributes):
        lengths = np.array([len(s) for s in sentences], dtype=np.int64)
        self.starts = np.zeros(len(sentences) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.starts[1:])
        self.forms = [f for s in sentences for f in s.forms[1:].tolist()]
        self.attrs = attributes.rows(self.forms)
        self.sentences = sentences

    def column(self, attr: str) -> list[str]:
        return [v for s in self.sentences for v in getattr(s, attr)[1:].tolist()]


def _jackknife_ambiguity(sentences: list, train: "_Packed", folds: int) -> None:
    """Replace the ambiguity class of every training word by the one the *other* folds
    give it (``folds`` consecutive parts): as on new text, a rare word then often has
    none, and the learner does not come to trust a feature that is perfect on its own
    training data only. O(words)."""
    bounds = [len(sentences) * j // folds for j in range(folds + 1)]
    per_fold: list[dict[str, Counter]] = []
    total: dict[str, Counter] = defaultdict(Counter)
    for j in range(folds):
        counts: dict[str, Counter] = defaultdict(Counter)
        for s in sentences[bounds[j]: bounds[j + 1]]:
            for f, t in zip(s.forms[1:].tolist(), s.upos[1:].tolist()):
                counts[normalize(f)][t] += 1
        for w, c in counts.items():
            total[w].update(c)
        per_fold.append(counts)
    for j in range(folds):
        values: dict[str, np.uint64] = {}
        for i in range(train.starts[bounds[j]], train.starts[bounds[j + 1]]):
            form = train.forms[i]
            value = values.get(form)
            if value is None:
                w = normalize(form)
                rest = total[w] - per_fold[j].get(w, Counter())
                value = values[form] = (np.uint64(stable_hash("a" + "|".join(sorted(rest))))
                                        if sum(rest.values()) >= MIN_AMBIGUITY_COUNT
                                        else UNKNOWN)
            train.attrs[i, A_AMBIG] = value


def _ids(values: list[str], classes: np.ndarray) -> np.ndarray:
    index = {c: i for i, c in enumerate(classes.tolist())}
    return np.array([index.get(v, -1) for v in values], dtype=np.int32)


class Tagger:
    """UPOS/XPOS/FEATS/lemma tagger (see the module docstring).

    Attributes: ``stages`` (name -> :class:`Stage`, in running order), ``ambiguity``
    (normalised form -> the UPOS tags it had in training, joined by ``|``),
    ``lemma_lookup`` ((form, UPOS) -> lemma; (form, "UPOS|FEATS") -> lemma where the
    UPOS alone is ambiguous; (form, "") -> the one lemma of a form that had only one in
    training), ``clusters`` (a :class:`~arboreal.features.clusters.Clusters` whose
    bit strings are features of every stage, or None), ``meta`` (training report).
    """

    def __init__(self, stages: dict[str, Stage], ambiguity: dict[str, str],
                 lemma_lookup: dict[tuple[str, str], str], meta: dict | None = None,
                 clusters=None):
        self.stages = stages
        self.ambiguity = ambiguity
        self.lemma_lookup = lemma_lookup
        self.meta = dict(meta or {})
        self.clusters = clusters
        self.attributes = WordAttributes(ambiguity, clusters=clusters)

    @property
    def columns(self) -> tuple[str, ...]:
        """The Sentence attributes this tagger predicts (``upos``, ``xpos``, ...)."""
        return tuple(COLUMNS[name] for name in self.stages)

    # ------------------------------------------------------------------ training
    @classmethod
    def train(cls, sentences: list, dev: list | None = None,
              epochs: int | dict[str, int] = DEFAULT_EPOCHS,
              bits: int = DEFAULT_BITS, seed: int = 0,
              log: Callable[[str], None] | None = None,
              decoding: str | dict[str, str] = "auto", clusters=None) -> "Tagger":
        """Train every stage whose column is not ``_`` throughout ``sentences``.

        ``clusters``: word clusters (:class:`~arboreal.features.clusters.Clusters`)
        whose 4- and 6-bit prefixes and whole bit strings, of the word and its
        neighbours, are features of every stage (stored with the tagger).

        ``epochs``: passes over the data, one number or one per stage name. With ``dev``
        each stage keeps its best epoch by dev accuracy (the earlier stages' *predictions*
        as context, as when tagging); without, the last epoch.

        ``decoding``: one of :data:`DECODINGS` or ``"auto"``, or one per stage name
        (missing names: ``"auto"``). ``"auto"`` with ``dev`` trains the stage once per
        :data:`AUTO_DECODINGS` entry (greedy, then first-order Viterbi with structured
        training) and keeps Viterbi only when it is better on dev by more than
        :data:`DECODING_MIN_Z` (a sign test; otherwise greedy, the faster); without
        ``dev`` it trains :data:`DEFAULT_DECODING`. The choice is the stage's
        ``decoding``, saved in the model file; ``meta["stages"][name]["decodings_tried"]``
        records each one's dev accuracy and test statistic.
        O(epochs * N * F * candidates) for N training words (greedy; see
        :mod:`arboreal.learn.tagging` for Viterbi)."""
        if not sentences:
            raise ArborealError("no training sentences for the tagger")
        if not any(len(s) for s in sentences):
            raise ArborealError("the tagger's training sentences have no words")
        upos_all = [v for s in sentences for v in s.upos[1:].tolist()]
        if all(v == "_" for v in upos_all):
            raise ArborealError("the training data has no UPOS tags: the tagger cannot be "
                                "trained (train with --no-tagger)")
        for value in (decoding.values() if isinstance(decoding, dict) else [decoding]):
            if value != "auto" and value not in DECODINGS:
                raise ValueError(f"tagger decoding {value!r} is not 'auto' or one of "
                                 f"{', '.join(DECODINGS)}")
        # ambiguity classes of words seen often enough
        seen: dict[str, Counter] = defaultdict(Counter)
        for s in sentences:
            for f, t in zip(s.forms[1:].tolist(), s.upos[1:].tolist()):
                seen[normalize(f)][t] += 1
        ambiguity = {w: "|".join(sorted(c)) for w, c in seen.items()
                     if sum(c.values()) >= MIN_AMBIGUITY_COUNT}
        attributes = WordAttributes(ambiguity, clusters=clusters)
        train = _Packed(sentences, attributes)
        held = _Packed(dev, attributes) if dev else None
        _jackknife_ambiguity(sentences, train, AMBIGUITY_FOLDS)

        stages: dict[str, Stage] = {}
        gold_ids: dict[str, np.ndarray] = {}
        dev_pred: dict[str, np.ndarray] = {}
        lemma_lookup: dict[tuple[str, str], str] = {}
        tried: dict[str, dict | None] = {}
        forms = train.forms
        for name, attr in COLUMNS.items():
            values = train.column(attr)
            if all(v == "_" for v in values):
                continue
            context = tuple(c for c in CONTEXT[name] if c in stages)
            if name == "lemma":
                lemma_lookup = build_lemma_lookup(
                    forms, train.column("upos"), values,
                    train.column("feats") if "feats" in stages else None)
                rules_of: dict[tuple[str, str], str] = {}
                values = [rules_of.setdefault((f, lem), lemma_rule(f, lem))
                          for f, lem in zip(forms, values)]
            classes = np.array(sorted(set(values)), dtype=str)
            gold = _ids(values, classes)
            ctx = (np.stack([gold_ids[c] for c in context], axis=1) if context
                   else np.zeros((len(gold), 0), dtype=np.int32)).astype(np.int32)
            cond_col = 0 if context and name in CONDITIONED else -1
            n_cond = len(stages[context[0]].classes) if cond_col == 0 else 1
            cand, cand_n = _candidates(gold, ctx[:, 0].astype(np.int64) if cond_col == 0 else None,
                                       n_cond, len(classes),
                                       MIN_RULE_COUNT if name == "lemma" else 1)
            n_epochs = epochs.get(name, DEFAULT_EPOCHS) if isinstance(epochs, dict) else epochs
            wanted = decoding.get(name, "auto") if isinstance(decoding, dict) else decoding
            if wanted == "auto":
                choices = (AUTO_DECODINGS[name] if held is not None
                           else (DEFAULT_DECODING[name],))
            else:
                choices = (wanted,)
            dctx = dgold = None
            if held is not None:
                dctx = (np.stack([dev_pred[c] for c in context], axis=1) if context
                        else np.zeros((len(held.forms), 0), dtype=np.int32)).astype(np.int32)
                dvalues = held.column(attr)
                if name == "lemma":
                    dvalues = [lemma_rule(f, lem) for f, lem in zip(held.forms, dvalues)]
                dgold = _ids(dvalues, classes)
            stage = pred = by_decoding = None
            for choice in choices:
                trial = _train_one(Stage(name, classes, cand, cand_n, np.zeros(0, np.float32),
                                         bits, context, decoding=choice),
                                   train, ctx, cond_col, gold, n_epochs, seed, held, dctx, dgold,
                                   log)
                if held is None:
                    stage = trial
                    continue
                trial_pred = _run_stage(trial, held, dctx)
                by_decoding = by_decoding or {}
                by_decoding[choice] = {"dev_accuracy": trial.dev_accuracy}
                if stage is not None:
                    z = _gain_z(trial_pred, pred, dgold)
                    by_decoding[choice]["z_vs_" + stage.decoding] = round(z, 2)
                if stage is None or z > DECODING_MIN_Z:
                    stage, pred = trial, trial_pred
            if log is not None and len(choices) > 1:
                log(f"tagger {name}: {stage.decoding} decoding kept ("
                    + ", ".join(f"{k} {v}" for k, v in by_decoding.items()) + ")")
            if held is not None:
                dev_pred[name] = pred
            stages[name] = stage
            tried[name] = by_decoding
            gold_ids[name] = gold
        return cls(stages, ambiguity, lemma_lookup,
                   {"epochs": epochs, "bits": bits, "seed": seed,
                    "train_words": len(forms),
                    "stages": {n: {"epochs": s.epochs, "dev_accuracy": s.dev_accuracy,
                                   "classes": len(s.classes), "decoding": s.decoding,
                                   "decodings_tried": tried[n]}
                               for n, s in stages.items()}}, clusters=clusters)

    # ------------------------------------------------------------------ tagging
    def predict(self, sentences: list) -> dict[str, list[str]]:
        """Predicted values of every stage's column, flat over the words of
        ``sentences`` (stage name -> list of str)."""
        packed = _Packed(sentences, self.attributes)
        ids: dict[str, np.ndarray] = {}
        out: dict[str, list[str]] = {}
        for name, stage in self.stages.items():
            ctx = (np.stack([ids[c] for c in stage.context], axis=1) if stage.context
                   else np.zeros((len(packed.forms), 0), dtype=np.int32)).astype(np.int32)
            ids[name] = pred = _run_stage(stage, packed, ctx)
            values = stage.classes[pred].tolist()
            if name == "lemma":
                upos = out.get("upos") or packed.column("upos")
                feats = out.get("feats") or packed.column("feats")
                values = lookup_lemmas(self.lemma_lookup, packed.forms, upos, feats, values)
            out[name] = values
        return out

    def tag(self, sentences: list, columns: tuple[str, ...] | None = None) -> list:
        """Copies of ``sentences`` with the columns in ``columns`` (Sentence attributes;
        default: every column this tagger predicts) replaced by predictions."""
        columns = self.columns if columns is None else columns
        predicted = self.predict(sentences)
        out = []
        k = 0
        for s in sentences:
            n = len(s)
            changes = {}
            for name, values in predicted.items():
                attr = COLUMNS[name]
                if attr in columns:
                    col = getattr(s, attr).copy()
                    col[1:] = values[k: k + n]
                    changes[attr] = col
            out.append(replace(s, **changes) if changes else s)
            k += n
        return out

    # ------------------------------------------------------------------ persistence
    def put(self, meta: dict, arrays: dict) -> None:
        """Add the tagger to a model file's metadata (section ``tagger``) and arrays
        (``tagger_*``)."""
        stages = []
        for name, st in self.stages.items():
            stages.append({"name": name, "bits": st.bits, "context": list(st.context),
                           "epochs": st.epochs, "dev_accuracy": st.dev_accuracy,
                           "decoding": st.decoding})
            put_strings(arrays, f"tagger_{name}_classes", st.classes.tolist())
            arrays[f"tagger_{name}_cand"] = st.cand.astype(np.int32)
            arrays[f"tagger_{name}_cand_n"] = st.cand_n.astype(np.int32)
            put_weights(arrays, f"tagger_{name}_w", st.weights)
        words = sorted(self.ambiguity)
        put_strings(arrays, "tagger_amb_words", words)
        put_strings(arrays, "tagger_amb_classes", [self.ambiguity[w] for w in words])
        put_lemma_lookup(arrays, "tagger_lemma", self.lemma_lookup)
        meta["tagger"] = {"features_version": FEATURES_VERSION, "stages": stages,
                          "training": self.meta}
        if self.clusters is not None:
            meta["tagger"]["clusters"] = _put_clusters(self.clusters, arrays)

    @classmethod
    def from_file_contents(cls, fields: MetaFields, arrays, parser_clusters=None) -> "Tagger":
        """The tagger of a model file (section ``tagger``); ModelError / ValueError on
        anything inconsistent. ``parser_clusters``: the clusters the parser already
        read from the file's ``clusters_*`` arrays, reused when the tagger's are those."""
        cfg = fields.section("tagger")
        cfg.int("features_version", FEATURES_VERSION, FEATURES_VERSION)
        specs = cfg.json("stages", list)
        stages: dict[str, Stage] = {}
        for i, spec in enumerate(specs[: len(COLUMNS)]):
            sf = MetaFields(fields.path, spec, f"{cfg.where}.stages[{i}]")
            name = sf.choice("name", tuple(COLUMNS))
            if name in stages or any(list(COLUMNS).index(name) < list(COLUMNS).index(o)
                                     for o in stages):
                raise sf.fail("name", "stages repeated or out of order")
            bits = sf.int("bits", 8, 26)
            context = tuple(sf.strings("context", max_items=len(COLUMNS)))
            if context != tuple(c for c in CONTEXT[name] if c in stages):
                raise sf.fail("context", f"does not match the stages before {name}")
            classes = get_strings(arrays, f"tagger_{name}_classes", max_count=1 << 20)
            if len(classes) == 0:
                raise ValueError(f"tagger stage {name} has no classes")
            n_cond = len(stages[context[0]].classes) if context and name in CONDITIONED else 1
            shape = array_shape(arrays, f"tagger_{name}_cand")
            if (len(shape) != 2 or shape[0] != n_cond or not 1 <= shape[1] <= MAX_CANDIDATES
                    or array_shape(arrays, f"tagger_{name}_cand_n") != (n_cond,)):
                raise ValueError(f"tagger stage {name}: candidate table of shape {shape}")
            cand = np.asarray(arrays[f"tagger_{name}_cand"])
            cand_n = np.asarray(arrays[f"tagger_{name}_cand_n"])
            if cand.dtype.kind != "i" or cand_n.dtype.kind != "i":
                raise ValueError(f"tagger stage {name}: candidate tables are not integers")
            cand, cand_n = cand.astype(np.int32), cand_n.astype(np.int32)
            if (cand_n < 1).any() or (cand_n > shape[1]).any():
                raise ValueError(f"tagger stage {name}: candidate counts out of range")
            used = np.arange(shape[1])[None, :] < cand_n[:, None]
            if (cand[used] < 0).any() or (cand[used] >= len(classes)).any():
                raise ValueError(f"tagger stage {name}: candidate class out of range")
            weights = get_weights(arrays, f"tagger_{name}_w", (1 << bits) + MAX_CANDIDATES)
            stages[name] = Stage(name, classes, cand, cand_n, weights, bits, context,
                                 sf.int("epochs", 0, 1 << 20, 0),
                                 sf.number("dev_accuracy", 0, 100, None, none_ok=True),
                                 # files written before Viterbi decoding were greedy
                                 sf.choice("decoding", tuple(DECODINGS), "greedy"))
        if "upos" not in stages:
            raise cfg.fail("stages", "no UPOS stage")
        words = get_string_list(arrays, "tagger_amb_words")
        amb = get_string_list(arrays, "tagger_amb_classes")
        if len(words) != len(amb):
            raise ValueError("tagger lexicon arrays differ in length")
        lookup = get_lemma_lookup(arrays, "tagger_lemma")
        clusters = None
        prefix = cfg.choice("clusters", CLUSTER_PREFIXES, "")
        if prefix == "clusters" and parser_clusters is not None:
            clusters = parser_clusters
        elif prefix:
            from arboreal.features.clusters import Clusters

            clusters = Clusters.from_arrays(arrays, prefix)
        return cls(stages, dict(zip(words, amb)), lookup,
                   cfg.json("training", dict, {}), clusters=clusters)


#: where a tagger's clusters are in a model file: none, the parser's own (``clusters_*``,
#: when they are the same clustering) or the tagger's (``tagger_clusters_*``)
CLUSTER_PREFIXES = ("", "clusters", "tagger_clusters")


def _put_clusters(clusters, arrays: dict) -> str:
    """Store ``clusters`` in a model file's arrays once: the prefix of the parser's
    identical arrays when the parser wrote them already, else under the tagger's own."""
    ours = clusters.to_arrays("clusters")
    if all(k in arrays and np.array_equal(np.asarray(arrays[k]), v) for k, v in ours.items()):
        return "clusters"
    arrays.update(clusters.to_arrays("tagger_clusters"))
    return "tagger_clusters"


def _gain_z(pred: np.ndarray, ref: np.ndarray, gold: np.ndarray) -> float:
    """Sign-test statistic of ``pred`` against ``ref``: (tokens only ``pred`` gets right
    - tokens only ``ref`` gets right) / sqrt(their sum); 0 when they never differ in
    being right (McNemar's test without continuity correction, signed)."""
    a = pred == gold
    b = ref == gold
    wins, losses = int((a & ~b).sum()), int((b & ~a).sum())
    return (wins - losses) / float(np.sqrt(wins + losses)) if wins + losses else 0.0


def _train_one(stage: Stage, train: _Packed, ctx: np.ndarray, cond_col: int, gold: np.ndarray,
               epochs: int, seed: int, held: _Packed | None, dctx: np.ndarray | None,
               dgold: np.ndarray | None, log: Callable[[str], None] | None) -> Stage:
    """Train ``stage`` (its ``decoding``) for ``epochs``; with ``held`` keep the epoch best
    on dev (``dctx`` the earlier stages' predictions there, ``dgold`` the gold ids)."""
    from arboreal.learn.tagging import StageLearner
    from arboreal.learn.trainer import Trainer

    learner = StageLearner(train.attrs, train.starts, ctx, cond_col, stage.cand, stage.cand_n,
                           gold, stage.bits, DECODINGS[stage.decoding])
    evaluate = None
    if held is not None:
        def evaluate(w: np.ndarray, epoch: int) -> dict:
            stage.weights = w
            pred = _run_stage(stage, held, dctx)
            acc = 100.0 * float((pred == dgold).mean()) if len(dgold) else 0.0
            if log is not None:
                log(f"tagger {stage.name} ({stage.decoding}) epoch {epoch}: dev accuracy "
                    f"{acc:.2f}")
            return {"score": acc}
    result = Trainer(epochs, seed).run(learner, evaluate)
    stage.weights = result.snapshot
    stage.epochs = result.epoch if held is not None else epochs
    if held is not None:
        stage.dev_accuracy = round(result.record.dev["score"], 2)
    return stage


def _run_stage(stage: Stage, packed: _Packed, ctx: np.ndarray) -> np.ndarray:
    """The class ids the stage predicts for the words of ``packed`` (its decoding)."""
    out = np.empty(len(packed.forms), dtype=np.int32)
    if len(out):
        cond_col = 0 if stage.conditioned else -1
        order = DECODINGS[stage.decoding]
        if order == 0:
            greedy_tag(packed.attrs, packed.starts, ctx, cond_col, stage.cand, stage.cand_n,
                       stage.weights, stage.bits, out)
        else:
            viterbi_tag(packed.attrs, packed.starts, ctx, cond_col, stage.cand, stage.cand_n,
                        stage.weights, stage.bits, order, out)
    return out
