"""What the unlabeled corpus's domain costs (issue 16): clusters of the 10M-token corpus
of ``benchmarks/unlabeled_corpus.py`` (documentation, dictionaries, books) against
clusters of the same 10M tokens plus in-domain text, the words of EWT train (web text;
its 204,577 tokens written ``--copies`` times, so that the in-domain share is visible
to the clustering), then the ``pipeline-n`` comparison of
``benchmarks/clusters_parsing.py`` with each cluster file (the parser's test text is
never clustered).

    python benchmarks/clusters_domain.py [--copies 3] [--sizes 1000] [--orders 1 2]
        [--seeds 0 1 2] [--cluster-args '--top-words 800']

Steps: ``runs/clusters/en-10M.txt`` (from ``benchmarks/clusters.py --sizes 10M``) plus
the copies -> ``runs/clusters/en-10M-ewt{copies}.txt``; ``arboreal clusters ...
--input tokenized --clusters 1000`` -> ``runs/clusters/en-10M-ewt{copies}.c1000.paths``;
then ``clusters_parsing.py --tags pipeline-n --paths THAT --runs
runs/clusters_parsing_domain{copies}`` (baseline runs copied from ``--base-runs``, which
hold the same baselines: the clusters file does not change a run without clusters).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UD = ROOT.parent / "shared" / "data" / "ud" / "UD_English-EWT"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=3)
    ap.add_argument("--sizes", nargs="+", default=["1000"])
    ap.add_argument("--orders", nargs="+", default=["1", "2"])
    ap.add_argument("--seeds", nargs="+", default=["0", "1", "2"])
    ap.add_argument("--cluster-args", default="--top-words 800")
    ap.add_argument("--base-runs", default=str(ROOT / "runs" / "clusters_parsing_n"))
    args = ap.parse_args(argv)

    from arboreal.features.first_order import _DIGIT_TABLE
    from arboreal.io.conllu import read_conllu

    work = ROOT / "runs" / "clusters"
    base_text = work / "en-10M.txt"
    if not base_text.exists():
        sys.exit(f"{base_text} missing: run python benchmarks/clusters.py --sizes 10M first")
    text = work / f"en-10M-ewt{args.copies}.txt"
    paths = work / f"en-10M-ewt{args.copies}.c1000.paths"
    if not paths.exists():
        lines = [" ".join(f.lower().translate(_DIGIT_TABLE) for f in s.forms[1:])
                 for s in read_conllu(next(UD.glob("*-ud-train.conllu")))]
        with open(text, "w", encoding="utf-8") as out, open(base_text, encoding="utf-8") as src:
            shutil.copyfileobj(src, out)
            for _ in range(args.copies):
                out.write("\n".join(lines) + "\n")
        subprocess.run([sys.executable, "-m", "arboreal", "clusters", str(text), "--input",
                        "tokenized", "--clusters", "1000", "-o", str(paths), "--quiet"],
                       check=True)
    runs = ROOT / "runs" / f"clusters_parsing_domain{args.copies}"
    runs.mkdir(parents=True, exist_ok=True)
    for f in Path(args.base_runs).glob("pipeline-n.*.base.*"):
        if not (runs / f.name).exists():
            shutil.copy(f, runs / f.name)
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "clusters_parsing.py"), "--tags",
         "pipeline-n", "--paths", str(paths), "--runs", str(runs), "--sizes", *args.sizes,
         "--orders", *args.orders, "--seeds", *args.seeds, "--phases", "train,report",
         f"--cluster-args={args.cluster_args}"]).returncode


if __name__ == "__main__":
    sys.exit(main())
