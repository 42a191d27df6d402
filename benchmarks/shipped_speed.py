"""The shipped models' parsing speed as a user meets it: whole ``arboreal parse NAME``
commands (interpreter start, numpy/numba/torch/transformers imports, the model's and
the encoder's loading included) on the test split of UD English-EWT, from raw text
(``--input text``, its ``# text`` lines, paragraphs at ``# newpar``) and from gold tokens
(CoNLL-U with the tags blanked), each model also in float32 (``ARBOREAL_PRECISION``)
where the default precision is bfloat16, in ``--rounds`` round-robin rounds; words/s
of the fastest and the median round, peak memory, and whether this CPU computes
bfloat16 natively (torch's check, which sets the neural models' default precision).

    python benchmarks/shipped_speed.py [--models en_ewt en_ewt_minilm] [--rounds 3]
        [--neural en_ewt_minilm] [--treebank UD_English-EWT] [--no-write] [--note '...']

The first round is preceded by one untimed parse of each model (numba's kernels are
compiled on a machine's first use, torch's on its first call).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import machine_description, report_tables, utc_now  # noqa: E402
from first_order import count_words, timed  # noqa: E402
from udpipe_baseline import blank_tags, raw_text, split_path  # noqa: E402

DEFAULT_MODELS = ["en_ewt", "en_ewt_minilm"]
NEURAL_MODELS = ["en_ewt_minilm"]


def cpu_bfloat16() -> bool | None:
    """torch's word on native bfloat16 (None without torch)."""
    try:
        from arboreal.neural.scorer import native_bfloat16
    except ImportError:
        return None
    return native_bfloat16()


def runs_of(models: list[str], neural: list[str],
            bf16: bool | None) -> list[tuple[str, str, str | None]]:
    """(model, input mode, precision forced or None) for every command to time: the
    ``neural`` models also in float32 where bfloat16 is their default."""
    out = []
    for model in models:
        precisions = [None] + (["float32"] if bf16 and model in neural else [])
        for precision in precisions:
            for mode in ("text", "conllu"):
                out.append((model, mode, precision))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    ap.add_argument("--neural", nargs="*", default=NEURAL_MODELS,
                    help="the models that parse in bfloat16 where the CPU computes it")
    ap.add_argument("--treebank", default="UD_English-EWT")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--section", default="shipped_speed")
    ap.add_argument("--note", default="")
    args = ap.parse_args(argv)
    test = split_path(args.treebank, "test")
    words = count_words(test)
    bf16 = cpu_bfloat16()
    started = utc_now()
    times: dict[tuple, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        inputs = {"text": tmp / "test.txt", "conllu": tmp / "test.blank.conllu"}
        inputs["text"].write_text(raw_text(test), encoding="utf-8")
        inputs["conllu"].write_text(blank_tags(test), encoding="utf-8")
        runs = runs_of(args.models, args.neural, bf16)

        def command(model: str, mode: str, precision: str | None):
            env = {**os.environ, "HF_HUB_OFFLINE": "1"}
            if precision:
                env["ARBOREAL_PRECISION"] = precision
            return ([sys.executable, "-m", "arboreal", "parse", model, str(inputs[mode]),
                     "--input", mode, "-o", str(tmp / "out.conllu")], env)

        for model in args.models:
            timed(*command(model, "text", None))
        for _ in range(args.rounds):
            for run in runs:
                times.setdefault(run, []).append(timed(*command(*run)))
    finished = utc_now()
    lines = [("| model | input | precision | words/s (fastest round) | words/s (median) "
              "| peak memory | load average |"), "|---|---|---|---:|---:|---:|---:|"]
    for (model, mode, precision), ts in times.items():
        fastest = min(t["wall"] for t in ts)
        median = statistics.median(t["wall"] for t in ts)
        shown = precision or ("default" + (" (bfloat16)" if bf16 and model in args.neural
                                           else ""))
        lines.append(f"| `{model}` | {'raw text' if mode == 'text' else 'gold tokens'} | "
                     f"{shown} | {words / fastest:,.0f} | {words / median:,.0f} | "
                     f"{max(t['rss_mib'] for t in ts):,.0f} MiB | "
                     f"{statistics.median(t['load'] for t in ts):.1f} |")
    report_tables(
        f"Runs: {started} to {finished} on {machine_description()}; this CPU computes "
        f"bfloat16 natively: {'yes' if bf16 else 'no' if bf16 is not None else 'unknown'} "
        f"(torch's check). {args.treebank} test, {words:,} words; each `arboreal parse "
        f"NAME` a whole command, {args.rounds} round-robin rounds after one untimed warm-up "
        "parse per model. No peer was run (Stanza is not installed here).",
        ["\n".join(lines) + "\n"], args.section, "The shipped models' parsing speed",
        "shipped_speed.py", argv if argv is not None else sys.argv[1:], args.note,
        not args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
