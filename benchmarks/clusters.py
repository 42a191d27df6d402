"""Brown clustering: ``arboreal clusters`` against Percy Liang's ``wcluster`` (issue 16).

Both cluster the same corpus files with the same number of clusters C and the same
minimum count: prefixes of 1M and 10M tokens of the unlabeled corpus of
benchmarks/unlabeled_corpus.py (its lines are in a fixed random order, so a prefix has
the mix of the whole), normalised beforehand as arboreal normalises (lower case, digits
to 0), so that both see the same word types. For each run the script records wall
and CPU (user + system) seconds and the peak resident memory, as ``/usr/bin/time -v``
prints them for the whole command (arboreal: ``python -m arboreal clusters ...
--quiet``, after a warm-up run so that numba's compiled kernels come from the cache),
and the average mutual information (AMI, bits) of the C clusters of each output,
both computed by ``arboreal.features.clusters.average_mutual_information`` on the same
counts (bigrams within a line; wcluster also counts bigrams across line ends and uses
unigram frequencies for the marginals, so this is one objective for both outputs).

wcluster is not part of arboreal and must never be vendored or depended on (its licence
allows research and education use only). Build it outside the repository::

    git clone https://github.com/percyliang/brown-cluster /tmp/brown-cluster   # or a copy
    make -C /tmp/brown-cluster

and pass ``--wcluster /tmp/brown-cluster/wcluster`` (the default path). If it is missing,
only arboreal is measured and the section says so. wcluster runs single-threaded
(``--threads 1``); its cache files ``TEXT.strdb``/``TEXT.int`` are deleted before each run.

    nice -n 10 python benchmarks/clusters.py [--sizes 1M 10M] [--clusters 256 1000]
        [--tools arboreal wcluster] [--cpu-limit 3600] [--limit TOOL:SIZE:C=SECONDS ...]
        [--skip TOOL:SIZE:C ...] [--rerun] [--no-write]

Results accumulate in ``runs/clusters/results.json`` (one record per tool, size, C and
minimum count; a run already there is not repeated without ``--rerun``), and the
``clusters`` section of docs/benchmarks.md is written from all of them, with the runs
of the plan that are missing or were stopped at their CPU limit named as such.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import machine_description, write_section  # noqa: E402

SIZES = {"1M": 1_000_000, "10M": 10_000_000, "18M": 18_000_000}
#: runs `arboreal clusters` whether or not the subcommand is registered yet
_WRAPPER = ("import sys, arboreal.cli as c\n"
            "if 'clusters' not in c.SUBCOMMANDS: c.SUBCOMMANDS = c.SUBCOMMANDS + ('clusters',)\n"
            "sys.exit(c.main(sys.argv[1:]))")


def prefix_file(corpus: Path, tokens: int, out: Path) -> Path:
    """The first lines of ``corpus`` holding ``tokens`` tokens, normalised, in ``out``."""
    from arboreal.features.clusters import normalize_word

    if out.exists() and out.stat().st_mtime > corpus.stat().st_mtime:
        return out
    n = 0
    tmp = out.with_name(out.name + ".tmp")
    with open(corpus, encoding="utf-8") as f, open(tmp, "w", encoding="utf-8") as g:
        for line in f:
            n += len(line.split())
            g.write(normalize_word(line))
            if n >= tokens:
                break
    if n < tokens:
        raise SystemExit(f"{corpus} has only {n} tokens, fewer than {tokens}")
    os.replace(tmp, out)
    return out


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(cmd: list[str], cpu_limit: float) -> dict:
    """Run ``cmd`` under ``/usr/bin/time -v``; once it has used ``cpu_limit`` CPU seconds
    the command itself is killed (time then still reports what it used; CPU time rather
    than wall time, which the other jobs of a shared machine stretch). Wall s, CPU s,
    peak RSS MB, exit status."""
    proc = subprocess.Popen(["/usr/bin/time", "-v"] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    timed_out = False
    while True:
        try:
            _, err = proc.communicate(timeout=2.0)
            break
        except subprocess.TimeoutExpired:
            children = _children(proc.pid)
            if children and _cpu_seconds(children[0]) > cpu_limit:
                timed_out = True
                for child in children:
                    os.kill(child, signal.SIGKILL)

    def field(name: str) -> str:
        m = re.search(rf"^\s*{re.escape(name)}: (.*)$", err, re.M)
        if not m:
            raise RuntimeError(f"no '{name}' from /usr/bin/time:\n{err[-3000:]}")
        return m.group(1).strip()

    wall = 0.0
    for part in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":"):
        wall = 60 * wall + float(part)
    out = {"wall_s": wall,
           "cpu_s": float(field("User time (seconds)")) + float(field("System time (seconds)")),
           "rss_mb": int(field("Maximum resident set size (kbytes)")) / 1024,
           "status": "timeout" if timed_out else ("ok" if proc.returncode == 0 else
                                                 f"exit {proc.returncode}")}
    if out["status"].startswith("exit"):
        out["stderr"] = err[-2000:]
    return out


def run_arboreal(text: Path, C: int, min_count: int, work: Path,
                 cpu_limit: float) -> tuple[dict, Path]:
    out = work / f"{text.stem}.c{C}.m{min_count}.arboreal.paths"
    cmd = [sys.executable, "-c", _WRAPPER, "clusters", str(text), "-o", str(out),
           "--clusters", str(C), "--min-count", str(min_count), "--quiet"]
    return timed(cmd, cpu_limit), out


def run_wcluster(binary: Path, text: Path, C: int, min_count: int, work: Path,
                 cpu_limit: float) -> tuple[dict, Path]:
    out_dir = work / f"{text.stem}.c{C}.m{min_count}.wcluster"
    for suffix in (".strdb", ".int"):
        Path(str(text) + suffix).unlink(missing_ok=True)
    cmd = [str(binary), "--text", str(text), "--c", str(C), "--min-occur", str(min_count),
           "--threads", "1", "--output_dir", str(out_dir)]
    result = timed(cmd, cpu_limit)
    for suffix in (".strdb", ".int"):
        Path(str(text) + suffix).unlink(missing_ok=True)
    return result, out_dir / "paths"


def render(results: list[dict], plan: list[tuple], mix: dict | None, wcluster_note: str,
           command: str) -> str:
    def key(r):
        return (SIZES[r["size"]], r["C"], r["min_count"], r["tool"] != "arboreal")

    base = next((r for r in results if r["tool"] == "baseline"), None)
    results = [r for r in results if r["tool"] != "baseline"]
    rows = sorted(results, key=key)
    lines = [
        "Brown clustering (`arboreal clusters`, numba) against Percy Liang's `wcluster` "
        "(C++, single thread; built outside the repository, never vendored), on prefixes of "
        "the unlabeled corpus of `benchmarks/unlabeled_corpus.py` (normalised: lower case, "
        "digits to 0), same C and minimum count. Whole commands under `/usr/bin/time -v` "
        "(arboreal with numba's kernels already compiled and cached); CPU = user + system "
        "seconds, which the other jobs on this shared machine disturb far less than wall "
        "time. AMI: average mutual information (bits) of the C clusters of each output, "
        "both computed by `average_mutual_information` on the same counts (bigrams within "
        "a line; wcluster itself also counts bigrams across line ends and takes unigram "
        "frequencies for the marginals, a slightly different objective). AMI ratio = "
        "arboreal / wcluster; speed-up = wcluster CPU / arboreal CPU.",
        "",
        "| tokens | words | C | tool | wall s | CPU s | peak RSS MB | AMI bits | AMI ratio "
        "| speed-up |",
        "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    by = {(r["tool"], r["size"], r["C"], r["min_count"]): r for r in results}
    for r in rows:
        other = by.get(("wcluster" if r["tool"] == "arboreal" else "arboreal", r["size"],
                        r["C"], r["min_count"]))
        ratio = speed = ""
        if r["tool"] == "arboreal" and other is not None:
            if other.get("ami") is not None and r.get("ami") is not None:
                ratio = f"{r['ami'] / other['ami']:.4f}"
            if other["status"] == "ok" and r["status"] == "ok":
                speed = f"{other['cpu_s'] / r['cpu_s']:.1f}x"
            elif other["status"] == "timeout" and r["status"] == "ok":
                speed = f"> {other['cpu_s'] / r['cpu_s']:.0f}x"
        status = "" if r["status"] == "ok" else f" ({r['status']})"
        ami = f"{r['ami']:.4f}" if r.get("ami") is not None else "-"
        words = f"{r['words']:,}"
        if r["min_count"] != 1:
            words += f" (min count {r['min_count']})"
        lines.append(f"| {r['tokens']:,} | {words} | {r['C']} | {r['tool']}{status} | "
                     f"{r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['rss_mb']:.0f} | {ami} | "
                     f"{ratio} | {speed} |")
    missing = [f"{tool} {size} C={C}" for (tool, size, C, m) in plan
               if (tool, size, C, m) not in by]
    timeouts = [f"{r['tool']} {r['size']} C={r['C']} (stopped after {r['cpu_s']:.0f} s CPU, "
                f"{r['wall_s']:.0f} s wall)" for r in rows if r["status"] == "timeout"]
    lines.append("")
    if timeouts:
        lines.append("Stopped at the CPU limit of the command (no AMI; the speed-up is a "
                     "lower bound): " + "; ".join(timeouts) + ".")
    if missing:
        lines.append("Not run: " + ", ".join(missing) + ".")
    if wcluster_note:
        lines.append(wcluster_note)
    if base is not None:
        lines.append(f"The fixed part of arboreal's figures: the same command on a 600-token "
                     f"file takes {base['wall_s']:.1f} s wall, {base['cpu_s']:.1f} s CPU and "
                     f"{base['rss_mb']:.0f} MB (Python, numpy, numba and the compiled kernels).")
    dates = sorted({r["date"] for r in rows})
    lines.append(f"Runs dated {', '.join(dates)}.")
    if mix:
        lines += ["", f"The corpus (`python benchmarks/unlabeled_corpus.py`; "
                  f"{mix['tokens']:,} tokens, {mix['sentences']:,} lines, packages from "
                  "Debian and npm only, licences in the script's docstring). Domain mix:", "",
                  "| source | packages | lines | tokens | share |",
                  "| --- | --- | ---: | ---: | ---: |"]
        for s in mix["sources"]:
            lines.append(f"| {s['source']} | {', '.join(s['packages'])} | {s['sentences']:,} | "
                         f"{s['tokens']:,} | {100 * s['share']:.1f}% |")
        lines += ["", "Mostly technical documentation and dictionary text: far from EWT's "
                  "web text, which the parser experiments of issue 16 have to take into "
                  "account."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=str(ROOT / "runs" / "unlabeled" / "en.txt"))
    ap.add_argument("--work", default=str(ROOT / "runs" / "clusters"))
    ap.add_argument("--sizes", nargs="+", default=["1M", "10M"], choices=list(SIZES))
    ap.add_argument("--clusters", nargs="+", type=int, default=[256, 1000])
    ap.add_argument("--min-count", type=int, default=1)
    ap.add_argument("--tools", nargs="+", default=["arboreal", "wcluster"],
                    choices=["arboreal", "wcluster"])
    ap.add_argument("--wcluster", default="/tmp/brown-cluster/wcluster")
    ap.add_argument("--cpu-limit", type=float, default=3600.0,
                    help="CPU seconds after which a run is stopped and reported as such")
    ap.add_argument("--limit", nargs="*", default=[], metavar="TOOL:SIZE:C=SECONDS",
                    help="a CPU limit for one run of the plan")
    ap.add_argument("--skip", nargs="*", default=[], metavar="TOOL:SIZE:C",
                    help="runs of the plan not to attempt (reported as not run)")
    ap.add_argument("--rerun", action="store_true", help="repeat runs already recorded")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    args = ap.parse_args(argv)

    from arboreal.features.clusters import average_mutual_information, count_corpus, read_paths

    corpus = Path(args.corpus)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    store = work / "results.json"
    results = json.loads(store.read_text()) if store.exists() else []
    binary = Path(args.wcluster)
    have_wcluster = binary.is_file() and os.access(binary, os.X_OK)
    note = ("" if have_wcluster or "wcluster" not in args.tools else
            f"wcluster was not found at {binary} (not built): only arboreal was measured.")
    plan = [(tool, size, C, args.min_count) for size in args.sizes for C in args.clusters
            for tool in args.tools]

    warm = work / "warmup.txt"
    warm.write_text("the cat sat on the mat\na dog sat on a cat\n" * 50)
    warmed = False

    def warm_up() -> None:
        """numba compiles (or loads) the kernels once, untimed; then the fixed cost of a
        run (interpreter, numba, kernels) on the 600-token file is recorded."""
        nonlocal warmed, results
        tiny = [sys.executable, "-c", _WRAPPER, "clusters", str(warm), "-o",
                str(work / "warmup.paths"), "--clusters", "3", "--quiet"]
        timed(tiny, 600)
        base = timed(tiny, 600)
        base.update(tool="baseline", size="-", C=3, min_count=1, tokens=600, words=7,
                    date=_dt.date.today().isoformat(), machine=machine_description())
        results = [r for r in results if r["tool"] != "baseline"] + [base]
        store.write_text(json.dumps(results, indent=1) + "\n")
        warmed = True

    counts_cache: dict[str, object] = {}
    # wcluster first, then arboreal, each from the cheapest run to the dearest
    order = sorted(plan, key=lambda p: (p[0] == "arboreal", SIZES[p[1]] * p[2] ** 2))
    for tool, size, C, m in order:
        if (tool == "wcluster" and not have_wcluster) or f"{tool}:{size}:{C}" in args.skip:
            continue
        key = (tool, size, C, m)
        if not args.rerun and any((r["tool"], r["size"], r["C"], r["min_count"]) == key
                                  for r in results):
            continue
        text = prefix_file(corpus, SIZES[size], work / f"en-{size}.txt")
        print(f"{tool} {size} C={C} min-count {m} ...", file=sys.stderr, flush=True)
        limits = dict(x.split("=", 1) for x in args.limit)
        limit = float(limits.get(f"{tool}:{size}:{C}", args.cpu_limit))
        if tool == "arboreal":
            if not warmed:
                warm_up()
            res, paths = run_arboreal(text, C, m, work, limit)
        else:
            res, paths = run_wcluster(binary, text, C, m, work, limit)
        if size not in counts_cache:
            counts_cache[size] = count_corpus([str(text)], "tokenized")
        counts = counts_cache[size]
        res.update(tool=tool, size=size, C=C, min_count=m, tokens=counts.tokens,
                   words=int((counts.counts >= m).sum()), date=_dt.date.today().isoformat(),
                   machine=machine_description(), ami=None)
        if res["status"] == "ok":
            res["ami"] = average_mutual_information(counts, read_paths(paths), m)
        print(f"  {json.dumps(res)}", file=sys.stderr, flush=True)
        results = [r for r in results if (r["tool"], r["size"], r["C"], r["min_count"]) != key]
        results.append(res)
        store.write_text(json.dumps(results, indent=1) + "\n")

    if "arboreal" in args.tools and (args.rerun or
                                     not any(r["tool"] == "baseline" for r in results)):
        if not warmed:
            warm_up()

    mix_path = Path(str(corpus) + ".sources.json")
    mix = json.loads(mix_path.read_text()) if mix_path.exists() else None
    command = "nice -n 10 python benchmarks/clusters.py " + " ".join(argv or sys.argv[1:])
    body = render(results, plan, mix, note, command)
    print(body)
    if not args.no_write:
        write_section("clusters", "Brown clusters: arboreal clusters vs wcluster",
                      command.strip(), body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
