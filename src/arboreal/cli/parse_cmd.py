"""``arboreal parse``: parse CoNLL-U or tokenized text with a trained model."""
from __future__ import annotations

import logging
import sys
import warnings

from arboreal.cli._args import int_in
from arboreal.cli._logging import is_terminal
from arboreal.errors import ArborealError

_log = logging.getLogger(__name__)


#: --input of the commands that read sentences to tag or parse
INPUT_HELP = ("auto (default): CoNLL-U if the first line that is not a comment starts "
              "with a word ID and a tab, else raw text; conllu: CoNLL-U, tag columns "
              "that are '_' throughout a sentence predicted; tokenized: one sentence per "
              "line, tokens separated by spaces (multiword tokens such as 'don't' or "
              "Spanish 'del' expanded into words by the model's tokenizer, as in raw "
              "text); words: the same, each token a syntactic word (never expanded); text: raw text, paragraphs separated by "
              "blank lines (tokenized and split into sentences by the model); lines: raw "
              "text, one sentence per line (tokenized by the model, never split)")


#: the help of every command's MODEL argument
MODEL_HELP = ("a model file written by 'arboreal train', or the name of an installed model "
              "package or of a model in the cache ('arboreal models' lists them)")


def add_input_arguments(p, several: bool = False) -> None:
    """INPUT, -o, --input, --retag, --output-format, --jobs and --quiet: shared by
    ``parse`` and ``tag``; ``several``: INPUT... (several files, with --scheduler; only
    ``parse`` has it, and only ``parse`` has --marginals)."""
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
    p.add_argument("--input", dest="input_format", choices=("auto", *INPUT_FORMATS),
                   default="auto", help=INPUT_HELP)
    columns = "columns, heads, labels and, with --marginals, probabilities" if several \
        else "columns"
    p.add_argument("--output-format", choices=OUTPUT_FORMATS, default="conllu",
                   help="conllu (default); json: one array of sentence objects (words with "
                        f"their {columns}); "
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
                    "UPOS, unless it was trained on data without tags). Reads standard input and writes standard output when no file "
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


def _no_tokenizer(model_path: str) -> ArborealError:
    return ArborealError(f"{model_path}: this model has no tokenizer (its treebank had no "
                         "'# text' lines, or it was trained with --no-tokenizer): give "
                         "--input tokenized or conllu")


def resolve_input(path: str, input_format: str, model, model_path: str | None):
    """``(source, input format)`` of an input (a path or "-") given ``--input``: the
    kind its first lines show (:mod:`arboreal.io.sniff`) for ``auto`` (raw text needs
    the model's tokenizer), else ``input_format`` checked against them. ``source`` is
    what to read: the path, or for standard input a stream that replays the lines
    looked at. FormatError for a model file, and for an explicit format the input is
    not (CoNLL-U read as text, text read as CoNLL-U), naming the right option."""
    from arboreal.errors import FormatError
    from arboreal.io.sniff import CONLLU, MODEL, TEXT, is_token_line, sniff

    name = "<stdin>" if path == "-" else path
    kind, line, text, source = sniff(path, name)
    if kind == MODEL:
        raise FormatError(name, None, "this is an arboreal model file, not input to tag or "
                          "parse (CoNLL-U or text); the MODEL comes first")
    if input_format == "auto":
        input_format = "conllu" if kind == CONLLU else "text"
        _log.debug("%s: %s input (--input auto)", name, input_format)
    elif input_format in ("text", "tokenized", "words", "lines") and kind == CONLLU \
            and is_token_line(text):
        raise FormatError(name, line, f"this is CoNLL-U, not {input_format}: give --input "
                          "conllu (or leave --input out: auto tells them apart)")
    elif input_format == "conllu" and kind == TEXT:
        raise FormatError(name, line, "this is plain text, not CoNLL-U (no word ID and tab "
                          "at the start of the line): give --input text (raw text) or "
                          "--input tokenized (one sentence per line), or leave --input out")
    if input_format in ("text", "lines") and model is not None \
            and getattr(model, "tokenizer", None) is None:
        raise _no_tokenizer(model_path)
    return source, input_format


def input_sentences(model, args):
    """The input's sentences, streamed in the format of ``--input`` (``auto``: the kind
    recognised; raw text through the model's tokenizer), for commands that look at
    sentences one by one."""
    from arboreal.io.text import iter_input

    source, args.input_format = resolve_input(args.input, args.input_format, model,
                                              args.model)
    return iter_input(source, args.input_format, getattr(model, "tokenizer", None))


def run_stream(args, tag_only: bool) -> int:
    """``parse`` and ``tag``: load the model, stream the input through it (``--jobs``
    processes), write the output, warn about what the model could not do fully."""
    from contextlib import ExitStack

    import arboreal
    from arboreal._compile import model_probes, notice_if_compiling
    from arboreal.models.facts import ModelFacts
    from arboreal.models.stream import StreamOptions, process_stream

    inputs = _stream_inputs(args)
    # on a cluster the workers load the model; here its metadata suffices for the checks
    scheduler = getattr(args, "scheduler", None)
    model = arboreal.load(args.model) if scheduler is None else ModelFacts(args.model)
    kbest, decode = getattr(args, "kbest", 1), getattr(args, "decode", "map")
    marginals = getattr(args, "marginals", False)
    if tag_only and not getattr(model, "tag_columns", ()):
        raise ArborealError(f"{args.model}: this model has no tagger (it was trained with "
                            "--no-tagger or on data without UPOS)")
    if (kbest > 1 or decode != "map" or marginals) and model.order > 1:
        raise ArborealError(f"{args.model}: --marginals, --kbest and --decode mbr need a "
                            f"first-order model (this one is of order {model.order})")
    if kbest > 1 and decode != "map":
        raise ArborealError("--kbest gives the K best trees; it cannot be combined with "
                            "--decode mbr")
    resolved = [resolve_input(path, args.input_format, model, args.model) for path in inputs]
    options = StreamOptions(resolved[0][1], args.output_format, args.retag, tag_only,
                            decode, marginals, kbest, _input_name(args))
    # workers compile there
    notice_if_compiling(args.quiet or scheduler is not None, model_probes(model), "parsing")
    with ExitStack() as stack:
        bar = None
        if not args.quiet and is_terminal():
            bar = stack.enter_context(_Progress(inputs))
        # memory budget warnings are summed up in one line below instead
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message=r".*memory budget")
        if scheduler is None:
            source = resolved[0][0]
            if bar is not None and bar.total is not None and args.input != "-":
                source = stack.enter_context(open(args.input, "rb"))   # the bar follows it
                bar.fd = source.fileno()
            report = process_stream(model, source, args.output, options, jobs=args.jobs,
                                    progress=None if bar is None else bar.update)
        else:
            report = _run_on_dask(args, inputs, resolved, options, bar)
    if report.fallbacks:
        _log.warning("%d sentence(s) too long for the order-%d memory budget were parsed "
                     "at first order", report.fallbacks, model.order)
    if report.split:
        from arboreal.models.pieces import MAX_WORDS

        _log.warning("%d sentence(s) longer than %d words were parsed in pieces of at most "
                     "that many words, joined into one tree", report.split, MAX_WORDS)
    return 0


class _Progress:
    """The progress bar of ``parse`` and ``tag`` on a terminal: with a total and an
    estimated time left when the input's size is known (a file, or standard input
    redirected from one: the bar follows the bytes read, with the sentences so far),
    else sentences without a total (a pipe, several files on a cluster). ``fd``: the
    file descriptor the input is read from, once it is open."""

    def __init__(self, inputs: list[str]):
        import os
        import stat

        self.sentences = 0
        self.start = 0
        self.fd: int | None = None
        self.total = None
        if len(inputs) == 1:
            try:
                if inputs[0] == "-":
                    fd = sys.stdin.fileno()
                    if stat.S_ISREG(os.fstat(fd).st_mode):
                        self.fd = fd
                        self.start = os.lseek(fd, 0, os.SEEK_CUR)
                        self.total = os.fstat(fd).st_size - self.start
                elif stat.S_ISREG(os.stat(inputs[0]).st_mode):
                    self.total = os.path.getsize(inputs[0])
            except (OSError, ValueError, AttributeError):   # no real file descriptor
                self.fd, self.total = None, None
        self.desc = (os.path.basename(inputs[0]) if inputs[0] != "-" else "<stdin>") \
            if len(inputs) == 1 else f"{len(inputs)} files"

    def __enter__(self):
        from tqdm import tqdm

        if self.total is None:
            self.bar = tqdm(unit=" sentences", file=sys.stderr, mininterval=0.5,
                            leave=False, desc=self.desc)
        else:
            self.bar = tqdm(total=self.total, unit="B", unit_scale=True, unit_divisor=1024,
                            file=sys.stderr, mininterval=0.5, leave=False, desc=self.desc)
        return self

    def update(self, sentences: int) -> None:
        """``sentences`` more were written."""
        import os

        self.sentences += sentences
        if self.total is None or self.fd is None:
            self.bar.update(sentences)
            return
        try:
            done = os.lseek(self.fd, 0, os.SEEK_CUR) - self.start
        except OSError:
            return
        self.bar.set_postfix_str(f"{self.sentences} sentences", refresh=False)
        self.bar.update(min(done, self.total) - self.bar.n)

    def __exit__(self, *exc) -> None:
        self.bar.close()


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


def _run_on_dask(args, inputs: list[str], resolved: list, options, bar):
    """``parse`` on a Dask cluster: the report summed over the inputs (``resolved``:
    each one's source and input format, see :func:`resolve_input`)."""
    from dataclasses import replace

    from arboreal.distributed import dask_client, output_paths, parse_files, stream_jobs
    from arboreal.models.stream import StreamReport

    if args.output_dir is not None:
        outputs = output_paths(inputs, args.output_dir)
    else:
        outputs = [args.output]
    jobs = [(source, output, replace(job_options, input_format=fmt))
            for (_, output, job_options), (source, fmt)
            in zip(stream_jobs(inputs, outputs, options), resolved)]
    with dask_client(args.scheduler, args.workers) as client:
        reports = parse_files(client, args.model, jobs,
                              progress=None if bar is None else bar.update)
    return StreamReport(sum(r.sentences for r in reports), sum(r.split for r in reports),
                        sum(r.fallbacks for r in reports))


def run(args) -> int:
    return run_stream(args, tag_only=False)
