"""Text as people have it, given to the shipped English model: one sentence per line,
plain text without blank lines, a closed pipe, an output path that cannot be written.

With the model shipped inside the package (``en_ewt``, no extras; ``--model`` for
another), on UD English-EWT:

* **one sentence per line**: the test split's ``# text`` lines, one per line and no
  blank line, parsed with ``arboreal parse MODEL FILE --input lines`` and with
  ``--input text`` (where line breaks are only spaces), each scored by
  ``arboreal.evaluation_ud`` (Sentences, Words, UPOS, LAS F1);
* **streaming**: the train split's ``# text`` lines (no blank line: one paragraph as
  ``--input text`` reads it) parsed whole to standard output, its first quarter
  alone and the whole twice over; for each, the seconds from the command's start to the first CoNLL-U line on
  standard output, the whole command's seconds, and its peak memory (``/usr/bin/time``);
  the same for the whole text twice over: a bounded reader's peak stops growing with
  the input;
* **a closed pipe**: the whole train text to ``| head -3``: arboreal's exit status (141
  expected, 128 + SIGPIPE, whatever the output's size) and seconds until it exited;
* **fail before the work**: ``arboreal train data/sample/train.conllu -o
  missing/folder/x.model``: exit status and seconds (no training may start).

    python benchmarks/text_input.py [--model en_ewt] [--treebank UD_English-EWT]
        [--work-dir runs/text_input] [--no-write] [--note '...']
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from first_order import timed  # noqa: E402
from pipeline import scores  # noqa: E402
from udpipe_baseline import split_path  # noqa: E402

SHOWN = ("Sentences", "Words", "UPOS", "LAS")


def sentence_lines(conllu: Path) -> list[str]:
    """The ``# text`` of every sentence of a CoNLL-U file, in order."""
    return [line.split("=", 1)[1].strip()
            for line in conllu.read_text(encoding="utf-8").splitlines()
            if line.startswith("# text =")]


def first_output(cmd: list[str]) -> dict:
    """Run ``cmd`` under /usr/bin/time with standard output read as it comes: seconds
    to the first line, to the end, peak RSS MiB, output lines, exit status."""
    import re
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        t0 = time.perf_counter()
        proc = subprocess.Popen(["/usr/bin/time", "-v", "-o", tf.name] + cmd,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err: list[bytes] = []
        reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))
        reader.start()
        first = None
        lines = 0
        for _ in proc.stdout:
            if first is None:
                first = time.perf_counter() - t0
            lines += 1
        status = proc.wait()
        total = time.perf_counter() - t0
        reader.join()
        report = tf.read()
    if status != 0:
        sys.stderr.write(b"".join(err).decode(errors="replace")[-3000:])
        raise SystemExit(f"command failed ({status}): {' '.join(cmd)}")
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", report)
    return {"first_output_s": first, "wall": total, "lines": lines,
            "rss_mib": int(rss.group(1)) / 1024 if rss else float("nan")}


def closed_pipe(cmd: list[str], keep: int = 3) -> dict:
    """``cmd | head -KEEP``: arboreal's exit status and the seconds until it exited."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(keep):
        proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate()
    return {"status": proc.returncode, "wall": time.perf_counter() - t0,
            "stderr": err.decode(errors="replace").strip()[-300:]}


def unwritable_output(arboreal: list[str], work: Path) -> dict:
    """``arboreal train SAMPLE -o missing/folder/x.model``: status, seconds, message."""
    target = work / "missing" / "folder" / "x.model"
    t0 = time.perf_counter()
    res = subprocess.run(arboreal + ["train", str(ROOT / "data" / "sample" / "train.conllu"),
                                     "-o", str(target)], capture_output=True, text=True,
                         check=False)
    return {"status": res.returncode, "wall": time.perf_counter() - t0,
            "stderr": res.stderr.strip()[-300:], "written": target.exists()}


def run(model: str, treebank: str, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    arboreal = [sys.executable, "-m", "arboreal"]
    test, train = split_path(treebank, "test"), split_path(treebank, "train")
    lines = work / "test.lines.txt"
    lines.write_text("\n".join(sentence_lines(test)) + "\n", encoding="utf-8")
    result: dict = {"model": model, "treebank": treebank, "modes": {}}
    for mode in ("lines", "text"):
        out = work / f"test.{mode}.conllu"
        t = timed(arboreal + ["parse", model, str(lines), "--input", mode, "-o", str(out)])
        result["modes"][mode] = {"scores": scores(test, out), "wall": t["wall"],
                                 "rss_mib": t["rss_mib"]}
    text = sentence_lines(train)
    whole = work / "train.text.txt"
    whole.write_text("\n".join(text) + "\n", encoding="utf-8")
    quarter = work / "train.quarter.txt"
    quarter.write_text("\n".join(text[: len(text) // 4]) + "\n", encoding="utf-8")
    twice = work / "train.twice.txt"
    twice.write_text("\n".join(text + text) + "\n", encoding="utf-8")
    words = sum(len(s.split()) for s in text)
    result["stream_words"] = {"quarter": sum(len(s.split()) for s in text[: len(text) // 4]),
                              "whole": words, "twice": 2 * words}
    result["stream"] = {name: first_output(arboreal + ["parse", model, str(path),
                                                       "--input", "text"])
                        for name, path in (("quarter", quarter), ("whole", whole),
                                           ("twice", twice))}
    result["closed_pipe"] = closed_pipe(arboreal + ["parse", model, str(whole),
                                                    "--input", "text"])
    result["unwritable_output"] = unwritable_output(arboreal, work)
    result["load"] = os.getloadavg()
    return result


def body(r: dict, note: str) -> str:
    lines = [f"The shipped model `{r['model']}` on {r['treebank']}."
             + (f" {note}" if note else ""), "",
             "### One sentence per line (the test split's `# text` lines, no blank line)", "",
             "| input mode | " + " | ".join(f"{m} F1" for m in SHOWN)
             + " | whole command s | peak MiB |",
             "|---|" + "---:|" * (len(SHOWN) + 2)]
    for mode, x in r["modes"].items():
        lines.append(f"| `--input {mode}` | " + " | ".join(f"{x['scores'][m]:.2f}" for m in SHOWN)
                     + f" | {x['wall']:.1f} | {x['rss_mib']:,.0f} |")
    s, w = r["stream"], r["stream_words"]
    lines += ["", "### Plain text without blank lines, to standard output (`--input text`)", "",
              "| file | words | first CoNLL-U line after (s) | whole command (s) | peak MiB |",
              "|---|---:|---:|---:|---:|"]
    for name, what in (("quarter", "the first quarter"), ("whole", "all"),
                       ("twice", "all, twice over")):
        lines.append(f"| train `# text` lines, {what} | {w[name]:,} | "
                     f"{s[name]['first_output_s']:.1f} | {s[name]['wall']:.1f} | "
                     f"{s[name]['rss_mib']:,.0f} |")
    p, u = r["closed_pipe"], r["unwritable_output"]
    lines += ["", f"- The whole file `| head -3`: arboreal exited with status {p['status']} "
              f"after {p['wall']:.1f} s" + (f" (stderr: `{p['stderr']}`)" if p["stderr"] else
                                            ", nothing on stderr") + ".",
              (f"- `arboreal train data/sample/train.conllu -o missing/folder/x.model`: status "
               f"{u['status']} after {u['wall']:.1f} s, "
               f"{'a file written' if u['written'] else 'nothing written'}: `{u['stderr']}`"),
              f"- Load average at the end: {r['load'][0]:.1f} (1 min)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="en_ewt")
    ap.add_argument("--treebank", default="UD_English-EWT")
    ap.add_argument("--work-dir", type=Path, default=ROOT / "runs" / "text_input")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    r = run(args.model, args.treebank, args.work_dir)
    (args.work_dir / "results.json").write_text(json.dumps(r, indent=1))
    text = body(r, args.note)
    print(text)
    if not args.no_write:
        from _report import command_line, write_section
        write_section("text_input", "Text as people have it: sentence per line, streaming, "
                      "closed pipes (English-EWT, the shipped model)",
                      command_line("text_input.py", argv if argv is not None else sys.argv[1:],
                                   args.note), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
