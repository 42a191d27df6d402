"""The same models before and after a change: every learner trained with two checkouts
of arboreal, compared array by array (issue 38, "The same models" and "Speed").

Each training and parsing command runs in a subprocess of its own whose PYTHONPATH is
the checkout's ``src``, so the two checkouts never share a process; base and head
alternate (base, head, base, head... with ``--repeats``), so that both see the same
load of the machine; with ``--parallel`` they run at the same time instead, each on one
core (``NUMBA_NUM_THREADS=1``, ``OMP_NUM_THREADS=1``), which halves the wall time on a
2-core machine while both still share one load. Per run it reports:

* whether every array of the two model files is bitwise equal (``np.array_equal`` and
  the same dtype): weights, labeler, pruner, tagger, tokenizer;
* otherwise the test UAS of both (the two must lie within 0.05) and whether their
  parses of the sample test file (data/sample) are identical;
* the time ratio head / base of training (wall time of ``arboreal train``) and of
  parsing the test file (``arboreal parse``), each the median over the repeats.

Suites: ``sample`` (data/sample, every learner and training path: the online learners
and their keep-best, patience and decoder choice, L-BFGS, AdaGrad and the C grid
(with dev and held out), the jointly labeled model, EG, local-margin (converging early,
and with the Laplacian), orders 2 and 3 with MIRA, the perceptron, log-linear and EG,
parameter mixing without a cluster, the tokenizer and tagger pipeline; small slices of
the treebank for the slow learners) and ``ewt`` (a treebank with gold UPOS, ``--dev``,
``--no-tagger --no-tokenizer``: first-order perceptron and MIRA, order 2 and 3 MIRA with
their default epochs; log-linear, EG and local-margin at one C for 5 epochs). Only
``ewt`` writes its section of docs/benchmarks.md (``--no-write``: print only).

Usage::

    python benchmarks/seam_identity.py --base /path/to/base --head . \\
        --treebank /work/shared/data/ud/UD_English-EWT --suite ewt [--repeats 2]
    python benchmarks/seam_identity.py --base /path/to/base --head . \\
        --treebank data/sample --suite sample [--runs perceptron,eg]
    # one checkout's results kept in a folder, compared later (no timing ratios):
    python benchmarks/seam_identity.py collect --checkout PATH --out DIR [--suite ...]
    python benchmarks/seam_identity.py compare DIR_BASE DIR_HEAD

The treebank folder holds ``*-train.conllu`` and ``*-test.conllu`` (and
``*-dev.conllu``; without one, runs that need dev data use the test file as dev).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
SAMPLE_TEST = ROOT / "data" / "sample" / "en_ewt-sample-test.conllu"
GOLD = ["--no-tagger", "--no-tokenizer", "--quiet"]

#: name -> (kind, arguments, training sentences (None: all), dev sentences (None: all;
#: 0: no dev)); {train}, {dev} are the (sliced) files. "cli": ``arboreal train``;
#: "api": a function of this script (:func:`_api_run`)
SAMPLE_RUNS = {
    "perceptron": ("cli", ["--learner", "perceptron", "--epochs", "3", "--hash-bits", "18",
                           *GOLD], None, None),
    "mira-auto": ("cli", ["--learner", "mira", "--epochs", "3", "--decoder", "auto",
                          "--hash-bits", "18", *GOLD], None, None),
    "mira-patience": ("cli", ["--learner", "mira", "--epochs", "5", "--patience", "1",
                              "--hash-bits", "18", *GOLD], 400, None),
    "mira-cle": ("cli", ["--learner", "mira", "--epochs", "2", "--decoder", "cle",
                         "--multi-root", "--hash-bits", "18", *GOLD], None, 0),
    "kbest-mira": ("cli", ["--learner", "kbest-mira", "--epochs", "2", "--hash-bits", "18",
                           *GOLD], None, None),
    "factored-mira": ("cli", ["--learner", "factored-mira", "--epochs", "2",
                              "--hash-bits", "18", *GOLD], None, 0),
    "loglinear-lbfgs": ("cli", ["--learner", "loglinear", "--learner-option", "C=1",
                                "--epochs", "4", "--hash-bits", "18", *GOLD], 300, None),
    "loglinear-grid-dev": ("cli", ["--learner", "loglinear", "--epochs", "2",
                                   "--hash-bits", "16", *GOLD], 120, 100),
    "loglinear-grid-heldout": ("cli", ["--learner", "loglinear", "--epochs", "2",
                                       "--hash-bits", "16", *GOLD], 150, 0),
    "loglinear-adagrad": ("cli", ["--learner", "loglinear", "--learner-option", "C=1",
                                  "--learner-option", "optimizer=adagrad",
                                  "--learner-option", "batch_size=32", "--epochs", "2",
                                  "--hash-bits", "18", *GOLD], 300, 0),
    "loglinear-labeled": ("cli", ["--learner", "loglinear-labeled", "--learner-option", "C=1",
                                  "--epochs", "3", "--hash-bits", "16", *GOLD], 150, 0),
    "eg": ("cli", ["--learner", "eg", "--learner-option", "C=0.03", "--epochs", "3",
                   "--hash-bits", "16", *GOLD], 150, 100),
    "local-margin": ("cli", ["--learner", "local-margin", "--learner-option", "C=0.1",
                             "--epochs", "3", "--hash-bits", "16", *GOLD], 150, 0),
    "local-margin-converged": ("cli", ["--learner", "local-margin", "--learner-option",
                                       "C=0.1", "--learner-option", "tol=0.2", "--epochs",
                                       "8", "--hash-bits", "16", *GOLD], 100, 0),
    "local-margin-laplacian": ("api", {"learner": "local-margin", "C": 0.1, "laplacian": 1.0,
                                       "epochs": 3, "lexicon": True}, 100, 0),
    "loglinear-laplacian": ("api", {"learner": "loglinear", "C": 1.0, "laplacian": 1.0,
                                    "epochs": 3, "lexicon": True}, 100, 0),
    "order2-mira": ("cli", ["--order", "2", "--learner", "mira", "--epochs", "2",
                            "--hash-bits", "18", *GOLD], 300, 100),
    "order2-perceptron": ("cli", ["--order", "2", "--learner", "perceptron", "--epochs", "2",
                                  "--hash-bits", "18", *GOLD], 300, 0),
    "order3-mira": ("cli", ["--order", "3", "--learner", "mira", "--epochs", "2",
                            "--hash-bits", "18", *GOLD], 200, 0),
    "order3-perceptron": ("cli", ["--order", "3", "--learner", "perceptron", "--epochs", "2",
                                  "--hash-bits", "18", *GOLD], 200, 100),
    "order2-loglinear": ("cli", ["--order", "2", "--learner", "loglinear", "--learner-option",
                                 "C=1", "--epochs", "2", "--hash-bits", "16", *GOLD], 80, 0),
    "order2-eg": ("cli", ["--order", "2", "--learner", "eg", "--learner-option", "C=0.03",
                          "--epochs", "2", "--hash-bits", "16", *GOLD], 80, 0),
    "mixing-perceptron": ("api", {"learner": "perceptron", "epochs": 2, "shards": 3,
                                  "mode": "uniform"}, 400, None),
    "mixing-mira-error": ("api", {"learner": "mira", "epochs": 2, "shards": 2,
                                  "mode": "error"}, 400, 0),
    "pipeline": ("cli", ["--learner", "perceptron", "--epochs", "2", "--tagger-epochs", "3",
                         "--hash-bits", "16", "--quiet"], 300, 100),
}

EWT_COMMON = ["--hash-bits", "23", *GOLD]
EWT_RUNS = {
    "perceptron": ("cli", ["--learner", "perceptron", *EWT_COMMON], None, None),
    "mira": ("cli", ["--learner", "mira", *EWT_COMMON], None, None),
    "order2-mira": ("cli", ["--order", "2", "--learner", "mira", *EWT_COMMON], None, None),
    "order3-mira": ("cli", ["--order", "3", "--learner", "mira", *EWT_COMMON], None, None),
    # the batch learners at one C (the middle of their grids) and 5 epochs: their C grid
    # (3 x 25 epochs on EWT) is the same code path that the sample suite's grid runs check
    "loglinear": ("cli", ["--learner", "loglinear", "--learner-option", "C=1", "--epochs",
                          "5", *EWT_COMMON], None, None),
    "eg": ("cli", ["--learner", "eg", "--learner-option", "C=0.03", "--epochs", "5",
                   *EWT_COMMON], None, None),
    "local-margin": ("cli", ["--learner", "local-margin", "--learner-option", "C=0.1",
                             "--epochs", "5", *EWT_COMMON], None, None),
}
SUITES = {"sample": SAMPLE_RUNS, "ewt": EWT_RUNS}
#: a tiny training of every kernel family per checkout, so that numba's compilation
#: (cached per checkout) is not timed
WARMUP = [["--learner", "mira", "--epochs", "1", "--hash-bits", "12", *GOLD],
          ["--order", "3", "--learner", "mira", "--epochs", "1", "--hash-bits", "12", *GOLD],
          ["--learner", "loglinear", "--learner-option", "C=1", "--epochs", "1",
           "--hash-bits", "12", *GOLD],
          ["--learner", "eg", "--learner-option", "C=0.03", "--epochs", "1",
           "--hash-bits", "12", *GOLD],
          ["--learner", "local-margin", "--learner-option", "C=0.1", "--epochs", "1",
           "--hash-bits", "12", *GOLD]]


# ---------------------------------------------------------------------- data
def _sentence_blocks(path: Path) -> list[str]:
    """The sentences of a CoNLL-U file as text blocks (comments included)."""
    text = path.read_text(encoding="utf-8")
    return [b.strip("\n") + "\n" for b in text.split("\n\n") if b.strip()]


def _treebank(folder: Path) -> dict:
    files = {}
    for part in ("train", "dev", "test"):
        found = sorted(folder.glob(f"*-{part}.conllu"))
        files[part] = found[0] if found else None
    if files["train"] is None or files["test"] is None:
        raise SystemExit(f"{folder}: needs *-train.conllu and *-test.conllu")
    if files["dev"] is None:
        files["dev"] = files["test"]
    return files


def _slice(path: Path, limit: int | None, out: Path) -> Path:
    if limit is None:
        return path
    out.write_text("\n".join(_sentence_blocks(path)[:limit]) + "\n", encoding="utf-8")
    return out


def _heads(path: Path) -> list[int]:
    """HEAD of every word line (integer ID) of a CoNLL-U file, in order."""
    heads = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) == 10 and cols[0].isdigit():
            heads.append(int(cols[6]) if cols[6].isdigit() else -1)
    return heads


def uas(gold: Path, pred: Path) -> float:
    g, p = _heads(gold), _heads(pred)
    if len(g) != len(p):
        raise SystemExit(f"{pred}: {len(p)} words, gold {gold} has {len(g)}")
    return 100.0 * sum(a == b for a, b in zip(g, p)) / max(len(g), 1)


# ---------------------------------------------------------------------- running
#: extra environment of every subprocess (``--parallel`` sets one thread each)
EXTRA_ENV: dict = {}


def _env(checkout: Path) -> dict:
    env = dict(os.environ)
    env.update(EXTRA_ENV)
    env["PYTHONPATH"] = str(checkout / "src")
    return env


def _timed(cmd: list[str], checkout: Path, cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=_env(checkout), cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(cmd)} failed ({done.returncode}):\n"
                         f"{done.stderr[-3000:]}")
    return seconds


def train(spec: tuple, files: dict, checkout: Path, model: Path, work: Path) -> float:
    """Train the model of ``spec`` with ``checkout`` into ``model``: wall seconds."""
    kind, args, n_train, n_dev = spec
    tb = _slice(files["train"], n_train, work / "train.conllu")
    dev = None if n_dev == 0 else _slice(files["dev"], n_dev, work / "dev.conllu")
    if kind == "cli":
        cmd = [sys.executable, "-m", "arboreal", "train", str(tb), "-o", str(model), *args]
        if dev is not None:
            cmd += ["--dev", str(dev)]
    else:
        cmd = [sys.executable, str(HERE), "_api", json.dumps(args), str(tb),
               "" if dev is None else str(dev), str(model)]
    return _timed(cmd, checkout, work)


def parse(checkout: Path, model: Path, data: Path, out: Path, work: Path) -> float:
    return _timed([sys.executable, "-m", "arboreal", "parse", str(model), str(data), "-o",
                   str(out), "--quiet"], checkout, work)


def _api_run(options: dict, train_path: str, dev_path: str, model_path: str) -> None:
    """The runs the command line cannot express (run in the checkout's environment):
    parameter mixing without a cluster, the Laplacian with a lexicon built here."""
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser

    train_s = read_conllu(train_path)
    dev_s = read_conllu(dev_path) if dev_path else None
    options = dict(options)
    kwargs = {"learner": options.pop("learner"), "epochs": options.pop("epochs"),
              "hash_bits": 16}
    if "shards" in options:
        from arboreal.learn.mixing import parameter_mixing

        kwargs["mixing"] = parameter_mixing(None, options.pop("shards"), options.pop("mode"))
    if options.pop("lexicon", False):
        import io

        from arboreal.features.lexicon import build_lexicon, count_cooccurrences

        text = "\n".join(" ".join(s.forms[1:].tolist()) for s in train_s).encode()
        counts = count_cooccurrences([io.BytesIO(text)], "tokenized", 5)
        kwargs["lexicon"] = build_lexicon(counts, 1, 1, neighbours=5, similar_words=500)
        kwargs["features"] = "words"
    model = Parser.train(train_s, dev_s, **kwargs, **options)
    model.save(model_path)


def model_arrays(path: Path) -> tuple[dict, dict]:
    """(arrays, metadata) of a model file."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "__meta__"}
        meta = json.loads(str(z["__meta__"])) if "__meta__" in z.files else {}
    return arrays, meta


def same_arrays(a: Path, b: Path) -> tuple[bool, list[str]]:
    """Whether two model files hold the same arrays bit for bit; the names that differ."""
    xa, _ = model_arrays(a)
    xb, _ = model_arrays(b)
    differ = sorted(set(xa) ^ set(xb))
    for k in sorted(set(xa) & set(xb)):
        if xa[k].dtype != xb[k].dtype or not np.array_equal(xa[k], xb[k]):
            differ.append(k)
    return not differ, differ


def _collect_one(name: str, spec: tuple, files: dict, checkout: Path, out: Path,
                 work: Path) -> dict:
    """Train and parse with one checkout; the results in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    model = out / f"{name}.npz"
    t_train = train(spec, files, checkout, model, work)
    pred = out / f"{name}.test.conllu"
    t_parse = parse(checkout, model, files["test"], pred, work)
    parse(checkout, model, SAMPLE_TEST, out / f"{name}.sample.conllu", work)
    return {"train_seconds": [t_train], "parse_seconds": [t_parse],
            "test_uas": uas(files["test"], pred)}


def warm_up(checkout: Path, files: dict, work: Path) -> None:
    tb = _slice(files["train"], 20, work / "warm.conllu")
    for args in WARMUP:
        _timed([sys.executable, "-m", "arboreal", "train", str(tb), "-o",
                str(work / "warm.npz"), *args], checkout, work)


# ---------------------------------------------------------------------- comparing
def compare_run(name: str, base_dir: Path, head_dir: Path, rb: dict, rh: dict) -> dict:
    bitwise, differ = same_arrays(base_dir / f"{name}.npz", head_dir / f"{name}.npz")
    _, mb = model_arrays(base_dir / f"{name}.npz")
    _, mh = model_arrays(head_dir / f"{name}.npz")
    sample_same = ((base_dir / f"{name}.sample.conllu").read_bytes()
                   == (head_dir / f"{name}.sample.conllu").read_bytes())
    row = {"run": name, "bitwise": bitwise, "differ": differ[:6],
           "best_epoch": [mb.get("best_epoch"), mh.get("best_epoch")],
           "uas": [rb["test_uas"], rh["test_uas"]], "sample_parses_same": sample_same}
    row["same_model"] = bitwise or (abs(rb["test_uas"] - rh["test_uas"]) <= 0.05
                                    and sample_same)
    if len(rb["train_seconds"]) and len(rh["train_seconds"]):
        row["train_ratio"] = (statistics.median(rh["train_seconds"])
                              / statistics.median(rb["train_seconds"]))
        row["parse_ratio"] = (statistics.median(rh["parse_seconds"])
                              / statistics.median(rb["parse_seconds"]))
    return row


def table(rows: list[dict], timed: bool) -> str:
    head = "| run | arrays bitwise equal | best epoch base / head | test UAS base / head | " \
           "sample parses identical | same model |"
    sep = "|---|---|---|---|---|---|"
    if timed:
        head += " train time head/base | parse time head/base |"
        sep += "---|---|"
    lines = [head, sep]
    for r in rows:
        line = (f"| {r['run']} | {'yes' if r['bitwise'] else 'no: ' + ', '.join(r['differ'])} "
                f"| {r['best_epoch'][0]} / {r['best_epoch'][1]} "
                f"| {r['uas'][0]:.2f} / {r['uas'][1]:.2f} "
                f"| {'yes' if r['sample_parses_same'] else 'no'} "
                f"| {'yes' if r['same_model'] else 'NO'} |")
        if timed:
            line += f" {r['train_ratio']:.3f} | {r['parse_ratio']:.3f} |"
        lines.append(line)
    return "\n".join(lines)


def _runs(suite: str, names: str | None) -> dict:
    runs = SUITES[suite]
    if not names:
        return runs
    wanted = names.split(",")
    unknown = [n for n in wanted if n not in runs]
    if unknown:
        raise SystemExit(f"unknown run(s) {', '.join(unknown)}; choose from {', '.join(runs)}")
    return {n: runs[n] for n in wanted}


def cmd_collect(args) -> None:
    files = _treebank(Path(args.treebank))
    checkout, out = Path(args.checkout).resolve(), Path(args.out).resolve()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in _runs(args.suite, args.runs).items():
            print(f"{name} ...", file=sys.stderr, flush=True)
            results[name] = _collect_one(name, spec, files, checkout, out, Path(tmp))
    old = out / "results.json"
    merged = json.loads(old.read_text()) if old.exists() else {}
    merged.update(results)
    old.write_text(json.dumps(merged, indent=1))


def cmd_compare(args) -> int:
    a, b = Path(args.base), Path(args.head)
    ra = json.loads((a / "results.json").read_text())
    rb = json.loads((b / "results.json").read_text())
    rows = [compare_run(n, a, b, ra[n], rb[n]) for n in ra if n in rb]
    print(table(rows, timed=False))
    return 0 if all(r["same_model"] for r in rows) else 1


def _describe(checkout: Path) -> str:
    """``checkout`` and its commit where it is a git work tree."""
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return f"{checkout} (commit {done.stdout.strip()})" if done.returncode == 0 else str(checkout)


def cmd_main(args) -> int:
    files = _treebank(Path(args.treebank))
    base, head = Path(args.base).resolve(), Path(args.head).resolve()
    runs = _runs(args.suite, args.runs)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        dirs = {"base": tmp / "base", "head": tmp / "head"}
        work = {"base": tmp / "work-base", "head": tmp / "work-head"}
        for folder in work.values():
            folder.mkdir()
        if args.parallel:
            EXTRA_ENV.update(NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
        pool = ThreadPoolExecutor(2) if args.parallel else None

        def each(order, job):
            """``job(which, checkout)`` for both checkouts, one after the other or at once."""
            if pool is None:
                return [(which, job(which, checkout)) for which, checkout in order]
            futures = [(which, pool.submit(job, which, checkout)) for which, checkout in order]
            return [(which, f.result()) for which, f in futures]

        if not args.no_warmup:
            print("warming up (numba compilation)", file=sys.stderr, flush=True)
            each((("base", base), ("head", head)),
                 lambda which, checkout: warm_up(checkout, files, work[which]))
        for name, spec in runs.items():
            res: dict = {}
            for rep in range(args.repeats):
                # alternate which checkout goes first, so that neither always runs on
                # a machine the other has just warmed
                order = (("base", base), ("head", head)) if rep % 2 == 0 else \
                    (("head", head), ("base", base))
                print(f"{name}: repeat {rep + 1}", file=sys.stderr, flush=True)
                done = each(order, lambda which, checkout: _collect_one(
                    name, spec, files, checkout, dirs[which], work[which]))
                for which, one in done:
                    if which in res:
                        res[which]["train_seconds"] += one["train_seconds"]
                        res[which]["parse_seconds"] += one["parse_seconds"]
                    else:
                        res[which] = one
            rows.append(compare_run(name, dirs["base"], dirs["head"], res["base"],
                                    res["head"]))
            print(table(rows[-1:], timed=True).splitlines()[-1], file=sys.stderr, flush=True)
    body = table(rows, timed=True)
    print(body)
    if args.suite == "ewt" and not args.no_write:
        sys.path.insert(0, str(HERE.parent))
        from _report import command_line, write_section

        mode = ("at the same time, one thread each" if args.parallel
                else "alternating")
        note = (f"Base: {_describe(base)}, head: {_describe(head)}. Each run trains with `arboreal train` and "
                f"parses the test file with `arboreal parse`, in subprocesses of their own "
                f"(base and head {mode}, {args.repeats} repeat(s), medians); "
                "'same model': arrays bitwise equal, or test UAS within 0.05 and the parses "
                "of data/sample's test file identical."
                + (f" {args.note}" if args.note else "") + "\n\n")
        write_section("seam_identity", "The same models after the scorer/trainer seam",
                      command_line("seam_identity.py", sys.argv[1:]),
                      note + body)
    return 0 if all(r["same_model"] for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_api":
        _api_run(json.loads(argv[1]), argv[2], argv[3], argv[4])
        return 0
    if argv and argv[0] in ("collect", "compare"):
        ap = argparse.ArgumentParser(prog=f"seam_identity.py {argv[0]}")
        if argv[0] == "collect":
            ap.add_argument("--checkout", required=True)
            ap.add_argument("--out", required=True)
            ap.add_argument("--treebank", default=str(ROOT / "data" / "sample"))
            ap.add_argument("--suite", choices=tuple(SUITES), default="sample")
            ap.add_argument("--runs", default=None, help="comma-separated run names")
            cmd_collect(ap.parse_args(argv[1:]))
            return 0
        ap.add_argument("base")
        ap.add_argument("head")
        return cmd_compare(ap.parse_args(argv[1:]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="checkout before the change")
    ap.add_argument("--head", required=True, help="checkout after the change")
    ap.add_argument("--treebank", default=str(ROOT / "data" / "sample"))
    ap.add_argument("--suite", choices=tuple(SUITES), default="sample")
    ap.add_argument("--runs", default=None, help="comma-separated run names (default: all)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--parallel", action="store_true",
                    help="run base and head at the same time, one thread each")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--note", default="", help="a sentence for the section (what else ran)")
    return cmd_main(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
