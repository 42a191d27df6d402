"""``arboreal parse``: parse CoNLL-U or tokenized text with a trained model."""
from __future__ import annotations

import sys
import warnings

from arboreal.cli._args import int_in
from arboreal.errors import ArborealError

#: the help of every command's MODEL argument
MODEL_HELP = ("a model file written by 'arboreal train', or the name of an installed model "
              "package or of a model in the cache ('arboreal models' lists them)")


def add_input_arguments(p, several: bool = False) -> None:
    """INPUT, -o, --input, --retag, --output-format, --jobs and --quiet: shared by
    ``parse`` and ``tag``; ``several``: INPUT... (several files, with --scheduler)."""
    from arboreal.io.json import OUTPUT_FORMATS
    from arboreal.io.text import INPUT_FORMATS

    if several:
        p.add_argument("input", metavar="INPUT", nargs="*", default=["-"],
                       help="input file (default: standard input); several files with "
                            "--scheduler and --output-dir")
    else:
        p.add_argument("input", metavar="INPUT", nargs="?", default="-",
                       help="input file (default: standard input)")
    p.add_argument("-o", "--output", metavar="OUTPUT", default="-",
                   help="output file, written atomically (default: standard output)")
    p.add_argument("--input", dest="input_format", choices=INPUT_FORMATS, default="conllu",
                   help="conllu (default): CoNLL-U, tag columns that are '_' throughout a "
                        "sentence predicted; tokenized: one sentence per line, tokens "
                        "separated by spaces; text: raw text, paragraphs separated by blank "
                        "lines (tokenized and split into sentences by the model)")
    p.add_argument("--output-format", choices=OUTPUT_FORMATS, default="conllu",
                   help="conllu (default); json: one array of sentence objects (words with "
                        "their columns, heads, labels and, with --marginals, probabilities); "
                        "displacy: displaCy's manual format (spacy.displacy.render(..., "
                        "manual=True))")
    p.add_argument("--retag", action="store_true",
                   help="predict UPOS, XPOS, FEATS and LEMMA even where the input has them")
    p.add_argument("--jobs", type=int_in(1, 256), default=1, metavar="N",
                   help="worker processes (default 1); blocks of sentences are processed "
                        "in parallel and written in input order, the same output as one "
                        "process; each worker shares the loaded model")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar and no compilation notice on stderr (the progress "
                        "bar only shows when stderr is a terminal)")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "parse", help="parse raw text, tokenized text or CoNLL-U with a trained model",
        description="Fill HEAD and DEPREL of every word; every other column, comment, "
                    "multiword token and empty node is kept, except tag columns (UPOS, "
                    "XPOS, FEATS, LEMMA) that are '_' throughout a sentence: the model's "
                    "tagger fills them (a model without a tagger refuses input without "
                    "UPOS). Reads standard input and writes standard output when no file "
                    "is given; HEAD may be '_' in the input. The input is streamed (a block "
                    "of sentences at a time), so memory does not grow with the corpus; an "
                    "output file is written atomically.")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    add_input_arguments(p, several=True)
    p.add_argument("--output-dir", metavar="DIR",
                   help="with --scheduler: write each INPUT's output, atomically, to a file "
                        "of the same name in DIR (created if missing)")
    add_dask_arguments(p, "parse")
    p.add_argument("--marginals", action="store_true",
                   help="write each word's head probability (the marginal of its arc over "
                        "all trees) and its label's probability in MISC as HeadProb= and "
                        "LabelProb= (first-order models; calibrated on dev when the model "
                        "was trained with --dev, see 'Probabilities' in the README)")
    p.add_argument("--kbest", type=int_in(1, 256), default=1, metavar="K",
                   help="write the K best trees of each sentence, best first, each with "
                        "'# kbest_rank' and '# tree_score' comments (exact; first-order "
                        "models)")
    p.add_argument("--decode", choices=("map", "mbr"), default="map",
                   help="map (default): the highest-scoring tree; mbr: the tree with the "
                        "largest sum of arc marginals, i.e. the most expected correct heads "
                        "(first-order models)")
    p.set_defaults(func=run)


def add_dask_arguments(p, command: str) -> None:
    """--scheduler and --workers: ``parse`` and ``train`` on a Dask cluster."""
    what = ("shards of sentences are parsed on the cluster's workers, the model sent once "
            "to each" if command == "parse" else
            "the parser is trained by iterative parameter mixing over the cluster's workers")
    p.add_argument("--scheduler", metavar="ADDRESS|local",
                   help=f"run on a Dask cluster: {what}; 'local' starts a cluster of "
                        "--workers processes on this machine for the command, an ADDRESS "
                        "(tcp://HOST:8786) uses a running scheduler (needs "
                        "pip install 'arboreal[dask]')")
    p.add_argument("--workers", type=int_in(1, 4096), default=None, metavar="N",
                   help="with --scheduler local: worker processes, one thread each (default: "
                        "the number of cores); with an ADDRESS: wait until N workers are "
                        "connected (default 1)")


def check_dask_arguments(args, extra: tuple[str, ...] = ()) -> None:
    """The Dask options without --scheduler are errors; so is a missing Dask."""
    if getattr(args, "scheduler", None) is None:
        for option in ("workers", *extra):
            if getattr(args, option.replace("-", "_"), None) is not None:
                raise ArborealError(f"--{option} needs --scheduler (ADDRESS or local)")
        return
    if not args.scheduler.strip():
        raise ArborealError("--scheduler needs an ADDRESS (tcp://HOST:PORT) or 'local'")
    from arboreal.distributed import import_distributed

    import_distributed()


def _input_name(args) -> str:
    return "<stdin>" if args.input == "-" else args.input


def input_sentences(model, args):
    """The input's sentences, streamed in the format of ``--input`` (raw text through
    the model's tokenizer), for commands that look at sentences one by one."""
    from arboreal.io.text import iter_input

    if args.input_format == "text" and getattr(model, "tokenizer", None) is None:
        raise ArborealError(f"{args.model}: this model has no tokenizer (its treebank had no "
                            "'# text' lines, or it was trained with --no-tokenizer): give "
                            "--input tokenized or conllu")
    return iter_input(args.input, args.input_format, getattr(model, "tokenizer", None))


def run_stream(args, tag_only: bool) -> int:
    """``parse`` and ``tag``: load the model, stream the input through it (``--jobs``
    processes), write the output, warn about what the model could not do fully."""
    import os

    import arboreal
    from arboreal._compile import notice_if_compiling
    from arboreal.models.facts import ModelFacts
    from arboreal.models.stream import StreamOptions, process_stream

    inputs = _stream_inputs(args)
    # on a cluster the workers load the model; here its metadata suffices for the checks
    model = arboreal.load(args.model) if getattr(args, "scheduler", None) is None \
        else ModelFacts(args.model)
    kbest, decode = getattr(args, "kbest", 1), getattr(args, "decode", "map")
    marginals = getattr(args, "marginals", False)
    if tag_only and getattr(model, "tagger", None) is None:
        raise ArborealError(f"{args.model}: this model has no tagger (it was trained with "
                            "--no-tagger or on data without UPOS)")
    if (kbest > 1 or decode != "map" or marginals) and model.order > 1:
        raise ArborealError(f"{args.model}: --marginals, --kbest and --decode mbr need a "
                            f"first-order model (this one is of order {model.order})")
    if kbest > 1 and decode != "map":
        raise ArborealError("--kbest gives the K best trees; it cannot be combined with "
                            "--decode mbr")
    options = StreamOptions(args.input_format, args.output_format, args.retag, tag_only,
                            decode, marginals, kbest, _input_name(args))
    scheduler = getattr(args, "scheduler", None)
    if scheduler is not None and args.input_format == "text" \
            and getattr(model, "tokenizer", None) is None:
        raise ArborealError(f"{args.model}: this model has no tokenizer (its treebank had no "
                            "'# text' lines, or it was trained with --no-tokenizer): give "
                            "--input tokenized or conllu")
    notice_if_compiling(args.quiet or scheduler is not None)   # workers compile there
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        desc = (os.path.basename(_input_name(args)) if len(inputs) == 1
                else f"{len(inputs)} files")
        bar = tqdm(unit=" sentences", file=sys.stderr, mininterval=0.5, leave=False,
                   total=None, desc=desc)
    try:
        # memory budget warnings are summed up in one line below instead
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*memory budget")
            if scheduler is None:
                report = process_stream(model, args.input, args.output, options,
                                        jobs=args.jobs,
                                        progress=None if bar is None else bar.update)
            else:
                report = _run_on_dask(args, inputs, options, bar)
    finally:
        if bar is not None:
            bar.close()
    if report.fallbacks:
        print(f"arboreal: warning: {report.fallbacks} sentence(s) too long for the order-"
              f"{model.order} memory budget were parsed at first order", file=sys.stderr)
    if report.split:
        from arboreal.models.pieces import MAX_WORDS

        print(f"arboreal: warning: {report.split} sentence(s) longer than {MAX_WORDS} words "
              "were parsed in pieces of at most that many words, joined into one tree",
              file=sys.stderr)
    return 0


def _stream_inputs(args) -> list[str]:
    """The inputs (``args.input`` set to the first), the output options checked."""
    inputs = args.input if isinstance(args.input, list) else [args.input]
    inputs = inputs or ["-"]
    args.input = inputs[0]
    check_dask_arguments(args)
    output_dir = getattr(args, "output_dir", None)
    if getattr(args, "scheduler", None) is None:
        if len(inputs) > 1 or output_dir is not None:
            raise ArborealError("several INPUT files and --output-dir need --scheduler "
                                "(ADDRESS or local)")
        return inputs
    if args.jobs > 1:
        raise ArborealError("--jobs is for one machine; with --scheduler the workers are "
                            "set by --workers")
    if output_dir is not None and args.output != "-":
        raise ArborealError("give -o OUTPUT or --output-dir DIR, not both")
    if len(inputs) > 1 and output_dir is None:
        raise ArborealError("several INPUT files need --output-dir DIR (one output each)")
    return inputs


def _run_on_dask(args, inputs: list[str], options, bar):
    """``parse`` on a Dask cluster: the report summed over the inputs."""
    from arboreal.distributed import dask_client, output_paths, parse_files, stream_jobs
    from arboreal.models.stream import StreamReport

    if args.output_dir is not None:
        outputs = output_paths(inputs, args.output_dir)
    else:
        outputs = [args.output]
    jobs = stream_jobs(inputs, outputs, options)
    with dask_client(args.scheduler, args.workers) as client:
        reports = parse_files(client, args.model, jobs,
                              progress=None if bar is None else bar.update)
    return StreamReport(sum(r.sentences for r in reports), sum(r.split for r in reports),
                        sum(r.fallbacks for r in reports))


def run(args) -> int:
    return run_stream(args, tag_only=False)
