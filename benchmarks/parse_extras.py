"""Around a parser: calibration of `parse --marginals` and the speed-up of `parse --jobs`.

1. Calibration. First-order models trained on EWT (gold tags, `--no-tagger
   --no-tokenizer`, `--dev` dev) with the log-linear learner and with the default
   perceptron; `arboreal parse TEST --marginals`; each word's HeadProb against whether
   its head is right: expected calibration error (10 equal-width bins, weighted by
   count) and the reliability table; the same for LabelProb against the label being
   right where the head is right.
2. Parallel parsing. `arboreal parse --jobs 1` and `--jobs 2`, whole commands, on EWT
   test x 4 (100k words): gold-tagged CoNLL-U with the perceptron model, and raw text
   with a full pipeline model (tokenizer, tagger, parser; `arboreal train` defaults);
   ``--rounds`` round-robin rounds, fastest run of each; the start-up (the same command
   on one sentence) is reported and subtracted for a second ratio. The outputs of 1 and
   2 jobs are compared byte for byte.

Writes the ``parse_extras`` section of docs/benchmarks.md.

    python benchmarks/parse_extras.py [--work-dir DIR] [--rounds 5] [--no-write]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import write_section  # noqa: E402
from first_order import UD, count_words, timed  # noqa: E402
from udpipe_baseline import raw_text  # noqa: E402

EXE = [sys.executable, "-m", "arboreal"]


def run(cmd: list[str]) -> None:
    res = subprocess.run(EXE + cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stderr[-3000:])
        raise SystemExit(f"failed: arboreal {' '.join(cmd)}")


def misc_value(misc: str, key: str) -> float:
    for item in misc.split("|"):
        if item.startswith(key + "="):
            return float(item.split("=", 1)[1])
    raise ValueError(f"no {key} in {misc!r}")


def reliability(prob: np.ndarray, right: np.ndarray, bins: int = 10) -> tuple[float, list]:
    """(expected calibration error, rows (lo, hi, count, mean prob, accuracy))."""
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.searchsorted(edges, prob, side="right") - 1, 0, bins - 1)
    ece, rows = 0.0, []
    for b in range(bins):
        sel = which == b
        if not sel.any():
            continue
        conf, acc = prob[sel].mean(), right[sel].mean()
        ece += sel.sum() / len(prob) * abs(conf - acc)
        rows.append((edges[b], edges[b + 1], int(sel.sum()), conf, acc))
    return float(ece), rows


def calibration(work: Path) -> tuple[list[str], dict[str, Path]]:
    from arboreal.io.conllu import read_conllu
    from arboreal.models import load_model

    train, dev, test = (UD / f"en_ewt-ud-{s}.conllu" for s in ("train", "dev", "test"))
    gold = read_conllu(test)
    lines, models = [], {}
    for learner in ("loglinear", "perceptron"):
        model = work / f"{learner}.model"
        models[learner] = model
        if not model.exists():
            run(["train", str(train), "--dev", str(dev), "--learner", learner, "--no-tagger",
                 "--no-tokenizer", "-o", str(model), "--quiet"])
        out = work / f"{learner}.marginals.conllu"
        run(["parse", str(model), str(test), "--marginals", "-o", str(out), "--quiet"])
        parsed = read_conllu(out)
        head_p, head_ok, label_p, label_ok = [], [], [], []
        for s, g in zip(parsed, gold):
            for m in range(1, len(s) + 1):
                head_p.append(misc_value(s.misc[m], "HeadProb"))
                head_ok.append(s.heads[m] == g.heads[m])
                if s.heads[m] == g.heads[m]:
                    label_p.append(misc_value(s.misc[m], "LabelProb"))
                    label_ok.append(s.deprels[m] == g.deprels[m])
        head_p, head_ok = np.array(head_p), np.array(head_ok, dtype=float)
        label_p, label_ok = np.array(label_p), np.array(label_ok, dtype=float)
        cal = load_model(model).meta["calibration"]
        ece, rows = reliability(head_p, head_ok)
        lece, _ = reliability(label_p, label_ok)
        lines += [f"### {learner} (EWT train, dev for the best epoch and the temperatures)", "",
                  f"- fitted temperatures: arcs {cal['arc_temperature']:.4g}, labels "
                  f"{cal['label_temperature']:.4g}",
                  f"- UAS {100 * head_ok.mean():.2f}; mean HeadProb {100 * head_p.mean():.2f}",
                  f"- **expected calibration error of HeadProb: {ece:.4f}**; of LabelProb "
                  f"(words with the right head): {lece:.4f}", "",
                  "| HeadProb bin | words | mean HeadProb | share with the right head |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {lo:.1f}-{hi:.1f} | {n} | {conf:.3f} | {acc:.3f} |"
                  for lo, hi, n, conf, acc in rows]
        lines.append("")
    return lines, models


def parallel(work: Path, perceptron: Path, rounds: int) -> list[str]:
    test = UD / "en_ewt-ud-test.conllu"
    pipeline = work / "pipeline.model"
    if not pipeline.exists():
        run(["train", str(UD / "en_ewt-ud-train.conllu"), "--dev",
             str(UD / "en_ewt-ud-dev.conllu"), "-o", str(pipeline), "--quiet"])
    conllu4 = work / "ewt-test-x4.conllu"
    conllu4.write_text(test.read_text(encoding="utf-8") * 4, encoding="utf-8")
    text4 = work / "ewt-test-x4.txt"
    text4.write_text("\n".join([raw_text(test)] * 4), encoding="utf-8")
    one_conllu = work / "one.conllu"
    one_conllu.write_text(test.read_text(encoding="utf-8").split("\n\n")[0] + "\n\n",
                          encoding="utf-8")
    one_text = work / "one.txt"
    one_text.write_text(raw_text(one_conllu), encoding="utf-8")
    words = count_words(conllu4)
    cases = {"gold-tagged CoNLL-U, perceptron parser": (perceptron, conllu4, one_conllu, "conllu"),
             "raw text, full pipeline": (pipeline, text4, one_text, "text")}
    best: dict = {}
    for _ in range(rounds):
        for name, (model, source, one, fmt) in cases.items():
            for jobs in (1, 2):
                for what, path in (("all", source), ("start-up", one)):
                    out = work / f"out-{fmt}-{jobs}-{what}.conllu"
                    t = timed(EXE + ["parse", str(model), str(path), "--input", fmt, "--jobs",
                                     str(jobs), "-o", str(out), "--quiet"])
                    key = (name, jobs, what)
                    if key not in best or t["wall"] < best[key]["wall"]:
                        best[key] = t
    lines = [f"EWT test x 4 ({words:,} words), `arboreal parse --jobs 1` and `--jobs 2` "
             f"as whole commands (fastest of {rounds} round-robin rounds), and the same "
             "minus the command's start-up (interpreter, imports, model load: the same "
             "command on one sentence, fastest run), which does not shrink with more "
             "processes:", "",
             "| input | 1 job: words/s | 2 jobs: words/s | speed-up, whole command | "
             "start-up s | speed-up after start-up | peak RSS MiB, largest process (1 / 2 "
             "jobs) | same output |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, (model, source, one, fmt) in cases.items():
        one_job, two = best[(name, 1, "all")], best[(name, 2, "all")]
        start = min(best[(name, 1, "start-up")]["wall"], best[(name, 2, "start-up")]["wall"])
        same = (work / f"out-{fmt}-1-all.conllu").read_bytes() == \
            (work / f"out-{fmt}-2-all.conllu").read_bytes()
        lines.append(f"| {name} | {words / one_job['wall']:,.0f} | {words / two['wall']:,.0f} | "
                     f"**{one_job['wall'] / two['wall']:.2f}x** | {start:.2f} | "
                     f"**{(one_job['wall'] - start) / (two['wall'] - start):.2f}x** | "
                     f"{one_job['rss_mib']:.0f} / {two['rss_mib']:.0f} | "
                     f"{'yes' if same else 'NO'} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work-dir", type=Path, default=None,
                    help="keep models and outputs here (default: a temporary folder)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        cal_lines, models = calibration(work)
        par_lines = parallel(work, models["perceptron"], args.rounds)
    body = "\n".join(["### Calibration of `parse --marginals` (EWT test)", "", *cal_lines,
                      "### `parse --jobs`", "", *par_lines, ""])
    print(body)
    if not args.no_write:
        write_section("parse_extras", "Probabilities and parallel parsing",
                      "python benchmarks/parse_extras.py", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
