"""Word encoders of the neural scorer: one module each, registered by name.

A word encoder turns each word's form into a vector that the network concatenates with
its built-in word features (the word embedding, the character CNN, the UPOS embedding,
the transformer's states) before the BiLSTM, so that the arc, label, part and tag
scorers above read it. ``arboreal train --scorer neural --scorer-option
word_encoders=NAME[,NAME...]`` adds the named ones, ``--scorer-option NAME.OPTION=VALUE``
sets their options; the model file records both, and its parameters and buffers are
saved with the network's.

The role (see :mod:`~arboreal.neural.encoders.char_ngrams`, the worked example): a
``torch.nn.Module`` subclass decorated with :func:`register_word_encoder`, with

* ``name`` (str): the registry's key;
* ``defaults`` (dict): its options and their defaults, each an int, float, bool or str
  (validated by type here; the class checks their ranges in ``__init__`` and raises
  ValueError);
* ``__init__(self, options: dict)``: every option given, its parameters built;
  ``self.dim``: the units of its vectors;
* ``form_features(self, forms: list[str]) -> np.ndarray``: (F, K) int64, the features
  of each distinct form (run once per corpus, in numpy; K may depend on the forms);
* ``forward(self, table, index) -> Tensor``: ``table`` (U, K) the rows of the batch's
  distinct forms, ``index`` (B, N) each word's row in ``table`` -> (B, N, dim).

Every module of this package is imported on the first use of the registry, so a new
encoder is one module here plus its test, with nothing edited elsewhere.
"""
from __future__ import annotations

from arboreal._registry import import_package_modules
from arboreal.errors import ArborealError

_ENCODERS: dict[str, type] = {}


def register_word_encoder(cls: type) -> type:
    """Class decorator: register a word encoder under its ``name``."""
    if not getattr(cls, "name", "") or not isinstance(getattr(cls, "defaults", None), dict):
        raise ValueError(f"{cls.__name__} needs a name and a dict of defaults")
    _ENCODERS[cls.name] = cls
    return cls


def _discover() -> None:
    import_package_modules(__name__)


def word_encoder_names() -> tuple[str, ...]:
    """The registered word encoders' names."""
    _discover()
    return tuple(_ENCODERS)


def word_encoder_class(name: str) -> type:
    """The class registered as ``name``; ArborealError naming the registered ones."""
    if name not in _ENCODERS:
        _discover()
    if name not in _ENCODERS:
        raise ArborealError(f"unknown word encoder {name!r}; choose from "
                            f"{', '.join(word_encoder_names()) or 'none'}")
    return _ENCODERS[name]


def word_encoder_specs(names: str | list, options: dict) -> dict:
    """{name: its options with defaults filled in} for the encoders ``names`` (a list,
    or one string of names separated by commas) and the options ``{"NAME.OPTION":
    value}``; ArborealError for an unknown encoder or option, or a value of the wrong
    type."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    specs = {}
    for name in names:
        specs[name] = dict(word_encoder_class(name).defaults)
    for key, value in options.items():
        name, _, option = key.partition(".")
        if name not in specs:
            raise ArborealError(f"option {key}: {name!r} is not among the word encoders "
                                f"asked for ({', '.join(specs) or 'none'}); add it with "
                                f"word_encoders={name}")
        default = specs[name].get(option)
        if option not in specs[name]:
            raise ArborealError(f"word encoder {name} has no option {option!r}; choose "
                                f"from {', '.join(sorted(specs[name]))}")
        if not _same_type(value, default):
            raise ArborealError(f"word encoder option {key} takes "
                                f"{type(default).__name__} values, not {value!r}")
        specs[name][option] = float(value) if isinstance(default, float) else value
    return specs


def _same_type(value, default) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return type(value) is type(default)


def build_word_encoders(specs: dict) -> dict:
    """{name: the encoder module} of ``specs`` ({name: options}, e.g. from a model file);
    ArborealError for an unknown encoder, an unknown option or a value out of range."""
    out = {}
    for name, options in specs.items():
        cls = word_encoder_class(name)
        if not isinstance(options, dict) or set(options) - set(cls.defaults):
            raise ArborealError(f"word encoder {name}: options "
                                f"{sorted(set(options) - set(cls.defaults))} unknown")
        full = dict(cls.defaults)
        full.update(options)
        for key, value in full.items():
            if not _same_type(value, cls.defaults[key]):
                raise ArborealError(f"word encoder {name}: option {key}={value!r} has the "
                                    f"wrong type")
        try:
            out[name] = cls(full)
        except ValueError as e:
            raise ArborealError(f"word encoder {name}: {e}") from None
    return out
