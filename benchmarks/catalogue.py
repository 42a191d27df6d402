"""The model catalogue, reproducible: one model per treebank with a train split.

    python benchmarks/catalogue.py [--data-dir ../shared/data/ud] [--treebanks NAME ...]
        [--out-dir runs/catalogue] [--docs docs/models.md] [--url-base URL]
        [--scorer auto|hashed|neural] [--train-args "..."] [--reuse TREEBANK=MODEL]
        [--wheels] [--ship] [--version 1.0]

For every treebank folder of ``--data-dir`` that has a ``*-ud-train.conllu`` (all, or
those named by ``--treebanks``):

1. **train** with the best default configuration: ``arboreal train TRAIN --dev DEV -o
   MODEL`` (``--dev`` when the treebank has a dev split), plus the arguments of the
   scorer (:data:`SCORERS`: the hook through which the neural scorer is chosen once
   it exists and torch is present; ``--scorer auto`` picks it then) and
   ``--train-args``. ``--reuse TREEBANK=MODEL`` takes a model trained so already;
2. **shrink** it (``arboreal shrink``, the default thresholds): the distributed file;
3. **evaluate** that file on the test split, from raw text (the ``# text`` lines, a
   paragraph at each ``# newpar``/``# newdoc``) and from gold tokens (tags, lemmas
   and trees blanked), CoNLL 2018 F1 (``arboreal.evaluation_ud``, what ``arboreal
   eval`` prints), and time raw-text parsing in process (words per second, one core,
   after a warm-up);
4. write the model's **card** into it: treebank, its UD release and commit, its
   license (``MANIFEST.md`` of the data folder, else the treebank's README ``License:``
   line; an NC license makes the card say "non-commercial use only"), the scores,
   the speed; the file is ``OUT/NAME-VERSION.model`` with ``NAME.card.json`` beside it
   (``--wheels``: the wheel of ``arboreal package`` too; ``--ship``: the model, its card
   also scored on data/sample's test file, into the package, src/arboreal/data/models/NAME,
   where ``pip install`` brings it and every command takes it by name);

then ``OUT/index.json``, the index ``arboreal download --index`` reads (model URLs
relative to it, or under ``--url-base``), and ``--docs`` (default docs/models.md): one
table of every model. Run it on all treebanks only when the machine is free: each
training takes minutes to tens of minutes of CPU.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import machine_description  # noqa: E402
from udpipe_baseline import blank_tags, raw_text  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "ud"
METRICS = ("Tokens", "Sentences", "Words", "UPOS", "XPOS", "UFeats", "Lemmas", "UAS", "LAS",
           "CLAS", "MLAS", "BLEX")
#: scorer -> the extra ``arboreal train`` arguments that select it. "hashed": today's
#: hashed linear features (the default of ``arboreal train``). "neural": the neural
#: scorer (issue 38's seam); its option is the one ``arboreal train --help`` must list
#: for ``--scorer auto`` to choose it, so nothing changes here until it has landed.
SCORERS: dict[str, list[str]] = {"hashed": [], "neural": ["--scorer", "neural"]}


def train_options() -> str:
    return subprocess.run([sys.executable, "-m", "arboreal", "train", "--help"],
                          capture_output=True, text=True, check=True).stdout


def choose_scorer(wanted: str) -> str:
    """``auto``: "neural" when torch is importable and ``arboreal train`` has that
    scorer's option, else "hashed"."""
    if wanted != "auto":
        return wanted
    import importlib.util

    if importlib.util.find_spec("torch") is not None \
            and SCORERS["neural"][0] in train_options():
        return "neural"
    return "hashed"


def split(folder: Path, name: str) -> Path | None:
    found = sorted(folder.glob(f"*-ud-{name}.conllu"))
    return found[0] if found else None


def model_name(train: Path) -> str:
    """``en_ewt`` for ``en_ewt-ud-train.conllu``."""
    return train.name.split("-ud-")[0]


def manifest_rows(data: Path) -> dict[str, dict]:
    """treebank -> {license, release, source, commit} from the data folder's MANIFEST.md
    ("Provenance and licenses" table), if there is one."""
    path = data / "MANIFEST.md"
    if not path.exists():
        return {}
    rows = {}
    header = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| "):
            header = None if not line.strip() else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "License" in cells and "Treebank" in cells:
            header = cells
            continue
        if header is None or len(cells) != len(header) or set(line) <= set("|-: "):
            continue
        row = dict(zip(header, cells))
        release = next((v for k, v in row.items() if k.startswith("UD release")), "")
        rows[row["Treebank"]] = {
            "license": re.split(r" \(", row["License"])[0].strip(),
            "release": " ".join(release.split()[:2]) if release.startswith("UD ") else None,
            "source": row.get("Source repository"),
            "commit": (row.get("Commit") or "").strip("`") or None}
    return rows


def readme_license(folder: Path) -> str | None:
    """The ``License:`` line of a UD treebank's README (machine-readable metadata)."""
    for readme in sorted(folder.glob("README*")):
        for line in readme.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("license:"):
                return line.split(":", 1)[1].strip()
    return None


def treebank_facts(folder: Path, manifest: dict) -> dict:
    facts = {"name": folder.name}
    row = manifest.get(folder.name, {})
    license_name = row.get("license") or readme_license(folder)
    if row.get("release"):
        facts["version"] = row["release"]
    if row.get("source"):
        facts["source"] = f"https://{row['source']}" + (f" ({row['commit']})"
                                                        if row.get("commit") else "")
    return {"treebank": facts, "license": license_name or "unknown (see the treebank)"}


def count_words(path: Path) -> int:
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            head = line.split("\t", 1)[0]
            if head.isdigit():
                n += 1
    return n


def scores(gold: Path, system: Path) -> dict[str, float]:
    from arboreal.evaluation_ud import evaluate_ud

    result = evaluate_ud(str(gold), str(system))
    return {m: round(100.0 * result[m]["f1"], 2) for m in METRICS}


def arboreal_cmd(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "arboreal", *args], check=True)
    return time.perf_counter() - t0


def raw_speed(model: Path, text: str, words: int) -> float:
    """Words per second parsing raw text in process (tokenizer, tagger, parser), after
    a warm-up on the first paragraph."""
    script = (f"import arboreal, sys, time\nm = arboreal.load({str(model)!r})\n"
              "text = sys.stdin.read()\nm.parse_text(text.split('\\n\\n')[0])\n"
              "t = time.perf_counter(); m.parse_text(text)\n"
              "print(time.perf_counter() - t)\n")
    out = subprocess.run([sys.executable, "-c", script], input=text, capture_output=True,
                         text=True, check=True).stdout
    return words / float(out)


def build(folder: Path, out: Path, work: Path, version: str, manifest: dict, scorer: str,
          train_args: list[str], reuse: Path | None) -> dict:
    """Train (or reuse), shrink, evaluate and card one treebank's model."""
    from arboreal.models.distribute import distribution_model

    train, dev, test = (split(folder, s) for s in ("train", "dev", "test"))
    name = model_name(train)
    full = work / f"{name}.full.model"
    command = ["train", str(train), *(["--dev", str(dev)] if dev else []), "-o", str(full),
               "--quiet", *SCORERS[scorer], *train_args]
    if reuse is not None:
        shutil.copyfile(reuse, full)
        train_seconds = None
    else:
        train_seconds = arboreal_cmd(*command)
    target = out / f"{name}-{version}.model"
    facts = treebank_facts(folder, manifest)
    card = {"version": version, **facts,
            "description": f"arboreal's catalogue model of {folder.name}"}
    distribution_model(full, target, name, card)
    result = {"treebank": folder.name, "name": name, "file": target.name,
              "full_bytes": full.stat().st_size, "train_seconds": train_seconds,
              "scorer": scorer, "license": facts["license"], "treebank_card": facts["treebank"]}
    if test is not None:
        text = raw_text(test)
        (work / f"{name}.test.txt").write_text(text, encoding="utf-8")
        (work / f"{name}.blank.conllu").write_text(blank_tags(test), encoding="utf-8")
        outputs = {}
        from arboreal.models.facts import ModelFacts

        if ModelFacts(str(target)).tokenizer and text.strip():
            arboreal_cmd("parse", str(target), str(work / f"{name}.test.txt"), "--input",
                         "text", "-o", str(work / f"{name}.raw.conllu"), "--quiet")
            outputs["raw_text"] = work / f"{name}.raw.conllu"
        arboreal_cmd("parse", str(target), str(work / f"{name}.blank.conllu"), "-o",
                     str(work / f"{name}.gold.conllu"), "--quiet")
        outputs["gold_tokens"] = work / f"{name}.gold.conllu"
        result["scores"] = {k: scores(test, v) for k, v in outputs.items()}
        result["scores"]["test_set"] = test.name
        if "raw_text" in outputs:
            result["speed"] = {"words_per_second": round(raw_speed(target, text,
                                                                   count_words(test))),
                               "input": "raw text, in process, one thread",
                               "machine": machine_description()}
    card.update({k: result[k] for k in ("scores", "speed") if k in result})
    card["training"] = {"command": "arboreal " + shlex.join(
        [a if a != str(full) else "MODEL" for a in command]).replace(str(folder), folder.name)}
    final = distribution_model(target, target, name, card)   # compact already: the card only
    (out / f"{name}.card.json").write_text(json.dumps(final, indent=2, sort_keys=True) + "\n",
                                           encoding="utf-8")
    result.update(bytes=final["size_bytes"], sha256=final["sha256"],
                  non_commercial=final.get("non_commercial", False))
    return result


SAMPLE = ROOT / "data" / "sample"
SHIPPED = ROOT / "src" / "arboreal" / "data" / "models"


def sample_scores(model: Path, work: Path) -> dict:
    """CoNLL 2018 F1 of ``model`` on data/sample's test file, from its raw text and from
    gold tokens: what tests/test_shipped_models.py checks a shipped model reproduces."""
    test = SAMPLE / "en_ewt-sample-test.conllu"
    blank = work / "sample.blank.conllu"
    blank.write_text(blank_tags(test), encoding="utf-8")
    arboreal_cmd("parse", str(model), str(SAMPLE / "en_ewt-sample-test.txt"), "--input",
                 "text", "-o", str(work / "sample.raw.conllu"), "--quiet")
    arboreal_cmd("parse", str(model), str(blank), "-o", str(work / "sample.gold.conllu"),
                 "--quiet")
    return {"test_set": "data/sample/en_ewt-sample-test.conllu",
            "raw_text": scores(test, work / "sample.raw.conllu"),
            "gold_tokens": scores(test, work / "sample.gold.conllu")}


def ship(result: dict, out: Path, work: Path, data: Path) -> Path:
    """Copy a catalogue model into the package (:data:`SHIPPED`/NAME), its card with the
    commit it was built at, the date, and its scores on data/sample's test file; the
    treebank's license beside it."""
    from arboreal.models.distribute import distribution_model

    model = out / result["file"]
    card = json.loads((out / f"{result['name']}.card.json").read_text(encoding="utf-8"))
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or None
    card.update(sample_scores=sample_scores(model, work), built_at_commit=commit,
                built_on=dt.date.today().isoformat(),
                attribution=f"trained on {result['treebank']} (Universal Dependencies), "
                            f"{result['license']}; see LICENSE.txt beside the model")
    target = SHIPPED / result["name"]
    target.mkdir(parents=True, exist_ok=True)
    for key in ("size_bytes", "sha256"):
        card.pop(key, None)
    final = distribution_model(model, target / "model.npz", result["name"], card)
    (target / "card.json").write_text(json.dumps(final, indent=2, sort_keys=True) + "\n",
                                      encoding="utf-8")
    license_file = data / result["treebank"] / "LICENSE.txt"
    if license_file.exists():
        shutil.copyfile(license_file, target / "LICENSE.txt")
    return target


def index_entry(result: dict, version: str, url_base: str | None) -> dict:
    url = result["file"] if not url_base else url_base.rstrip("/") + "/" + result["file"]
    entry = {"name": result["name"], "version": version, "url": url,
             "sha256": result["sha256"], "size": result["bytes"],
             "license": result["license"], "treebank": result["treebank_card"]}
    if "scores" in result:
        entry["scores"] = result["scores"]
    return entry


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def models_doc(results: list[dict], command: str, load: tuple[float, float],
               available: list[str]) -> str:
    def cell(r: dict, kind: str, metric: str) -> str:
        value = r.get("scores", {}).get(kind, {}).get(metric)
        return "n/a" if value is None else f"{value:.2f}"

    lines = ["# The model catalogue", "",
             "One model per UD treebank with a train split, each trained, shrunk, evaluated "
             "and carded by one command (what it does: its docstring):", "",
             f"Command: `{command}`  ", f"Machine: {machine_description()}  ",
             f"Date: {dt.date.today().isoformat()}  ",
             f"Load average (1 min) at the start and end: {load[0]:.1f}, {load[1]:.1f} "
             "(a shared machine: speeds are noisy)", "",
             "Scores: CoNLL 2018 F1 on each treebank's test split, of the distributed "
             "(compact) model, from raw text and from gold tokens (tags, lemmas and trees "
             "blanked). Size: the compact model file (the full one in parentheses). "
             "Words/s: raw text to trees in process, one thread. Use a model by its name: "
             "`arboreal download NAME --index INDEX`, then `arboreal parse NAME text.txt "
             "--input text` or `arboreal.load(\"NAME\")`.", "",
             "| treebank | name | license | raw Tokens | raw UPOS | raw UAS | raw LAS | "
             "gold-token UPOS | gold-token UAS | gold-token LAS | size MB | words/s |",
             "|---|---|---|" + "---:|" * 9]
    for r in sorted(results, key=lambda r: r["treebank"]):
        licence = r["license"] + (" (non-commercial use only)" if r["non_commercial"] else "")
        speed = r.get("speed", {}).get("words_per_second")
        lines.append(
            f"| {r['treebank']} | {r['name']} | {licence} | {cell(r, 'raw_text', 'Tokens')} | "
            f"{cell(r, 'raw_text', 'UPOS')} | {cell(r, 'raw_text', 'UAS')} | "
            f"{cell(r, 'raw_text', 'LAS')} | {cell(r, 'gold_tokens', 'UPOS')} | "
            f"{cell(r, 'gold_tokens', 'UAS')} | {cell(r, 'gold_tokens', 'LAS')} | "
            f"{r['bytes'] / 1e6:.2f} ({r['full_bytes'] / 1e6:.2f}) | "
            f"{'n/a' if speed is None else speed} |")
    reused = [r["treebank"] for r in results if r["train_seconds"] is None]
    if reused:
        lines += ["", f"Not trained by this run (`--reuse`): {', '.join(reused)}, a model "
                      "trained before by the same `arboreal train` command (its card gives "
                      "it)."]
    missing = sorted(set(available) - {r["treebank"] for r in results})
    if missing:
        lines += ["", f"Not in this run ({len(results)} of the {len(available)} treebanks with "
                      f"a train split): {', '.join(missing)}. Run the command without "
                      "`--treebanks` for the whole table."]
    nc = [r["treebank"] for r in results if r["non_commercial"]]
    if nc:
        lines += ["", f"Models of {', '.join(sorted(nc))} are trained on treebanks under "
                      "non-commercial licenses (CC BY-NC-SA): non-commercial use only; their "
                      "cards say so."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--treebanks", nargs="*", default=None)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "catalogue")
    ap.add_argument("--docs", type=Path, default=ROOT / "docs" / "models.md")
    ap.add_argument("--url-base", default=None,
                    help="absolute URL the model files will be published under (default: "
                         "URLs relative to index.json)")
    ap.add_argument("--scorer", choices=("auto", *SCORERS), default="auto")
    ap.add_argument("--train-args", default="", help="more 'arboreal train' arguments")
    ap.add_argument("--reuse", action="append", default=[], metavar="TREEBANK=MODEL",
                    help="a model already trained by the same command, instead of training")
    ap.add_argument("--version", default="1.0", help="the models' version (PEP 440)")
    ap.add_argument("--wheels", action="store_true", help="also write each model's wheel")
    ap.add_argument("--ship", action="store_true",
                    help="also put each model, its card scored on data/sample's test file as "
                         "well, into the package (src/arboreal/data/models/NAME/)")
    args = ap.parse_args(argv)
    from arboreal.models.wheel import check_version

    check_version(args.version)
    reuse = dict(item.split("=", 1) for item in args.reuse)
    trainable = [f for f in sorted(args.data_dir.iterdir())
                 if f.is_dir() and split(f, "train") is not None]
    folders = [f for f in trainable if args.treebanks is None or f.name in args.treebanks]
    if not folders:
        raise SystemExit(f"no treebank with a train split in {args.data_dir}")
    scorer = choose_scorer(args.scorer)
    manifest = manifest_rows(args.data_dir)
    out, work = args.out_dir / "models", args.out_dir / "work"
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    results = []
    for folder in folders:
        print(f"catalogue: {folder.name}", file=sys.stderr, flush=True)
        results.append(build(folder, out, work, args.version, manifest, scorer,
                             shlex.split(args.train_args),
                             Path(reuse[folder.name]) if folder.name in reuse else None))
        if args.wheels:
            from arboreal.models.distribute import package

            package(out / results[-1]["file"], args.out_dir / "wheels", results[-1]["name"])
        if args.ship:
            print(f"catalogue: shipped in {ship(results[-1], out, work, args.data_dir)}",
                  file=sys.stderr, flush=True)
    index = {"format": "arboreal-model-index", "format_version": 1,
             "models": [index_entry(r, args.version, args.url_base) for r in results]}
    write_atomically(out / "index.json", json.dumps(index, indent=2) + "\n")
    (args.out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    shown = ["python", "benchmarks/catalogue.py", *argv]
    write_atomically(args.docs, models_doc(results, shlex.join(shown),
                                           (load0, os.getloadavg()[0]),
                                           [f.name for f in trainable]))
    print(f"catalogue: {len(results)} model(s), index {out / 'index.json'}, table {args.docs}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
