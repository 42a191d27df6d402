"""Ship a model trained by a benchmark run (benchmarks/encoder.py, benchmarks/neural.py)
inside the package, as benchmarks/catalogue.py --ship does for the catalogue's models:
compacted into src/arboreal/data/models/NAME/model.npz, its card holding the training
command, the commit the model was trained at, the date, the test-split scores of the run
that trained it, and its scores on data/sample's test file (measured here, which
tests/test_shipped_models.py checks it reproduces); the treebank's license beside it.

    python benchmarks/ship_model.py RESULTS_JSON --run encoder --name en_ewt_minilm
        --trained-at COMMIT [--treebank UD_English-EWT] [--description '...']
        [--data-dir ../shared/data/ud]

RESULTS_JSON is the results.json of the run's work directory; the model is
WORK_DIR/RUN/TREEBANK.model beside it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from catalogue import SHIPPED, manifest_rows, sample_scores, treebank_facts  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--run", required=True, help="the run's name in the results (encoder, "
                                                 "baseline, neural)")
    ap.add_argument("--name", required=True)
    ap.add_argument("--treebank", default="UD_English-EWT")
    ap.add_argument("--trained-at", required=True,
                    help="the commit whose code trained the model")
    ap.add_argument("--description", default=None)
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "ud")
    args = ap.parse_args(argv)
    from arboreal.models.distribute import distribution_model

    results = json.loads(args.results.read_text(encoding="utf-8"))
    entry = next(r for r in results if r["treebank"] == args.treebank)
    run = entry[args.run]
    model = args.results.parent / args.run / f"{args.treebank}.model"
    folder = args.data_dir / args.treebank
    facts = treebank_facts(folder, manifest_rows(args.data_dir))
    stem = next(folder.glob("*-ud-train.conllu")).name.removesuffix("-train.conllu")
    command = ["train", f"{args.treebank}/{stem}-train.conllu", "--dev",
               f"{args.treebank}/{stem}-dev.conllu", "-o", "MODEL", "--quiet",
               *entry["args"][args.run]]
    card = {"version": "1.0", **facts,
            "description": args.description or f"arboreal's model of {args.treebank}",
            "training": {"command": "arboreal " + shlex.join(command),
                         "script": f"benchmarks/{args.results.parent.name}"},
            "scores": {"raw_text": run["arboreal_raw"], "gold_tokens": run["arboreal_gold_tok"],
                       "test_set": f"{stem}-test.conllu"},
            "built_at_commit": args.trained_at, "built_on": dt.date.today().isoformat(),
            "attribution": f"trained on {args.treebank} (Universal Dependencies), "
                           f"{facts['license']}; see LICENSE.txt beside the model"}
    card["training"].pop("script")
    target = SHIPPED / args.name
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        compact = Path(tmp) / "model.npz"
        distribution_model(str(model), compact, args.name, card)
        card["sample_scores"] = sample_scores(compact, Path(tmp))
        final = distribution_model(str(compact), target / "model.npz", args.name, card)
    (target / "card.json").write_text(json.dumps(final, indent=2, sort_keys=True) + "\n",
                                      encoding="utf-8")
    license_file = folder / "LICENSE.txt"
    if license_file.exists():
        shutil.copyfile(license_file, target / "LICENSE.txt")
    print(f"shipped {args.name} in {target} ({final['size_bytes'] / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
