"""The registry of tokenizer kinds: what loading and ``prepare`` need to know about each.

Every kind is one module (listed in ``KIND_MODULES``) whose ``Tokenizer`` subclass is decorated
with ``@register_tokenizer``. The class declares ``kind`` (its file kind), ``fit_name`` (the
``prepare --tokenizer NAME`` that fits it, or None), ``fit_options`` (which ``FitOptions`` its fit
reads), ``thread_safe_encode`` and ``trainer(options)``: a ``Trainer`` that fits it from type
counts folded batch by batch, on threads or on Ray. ``load_tokenizer`` dispatches on ``kind``;
the pipeline asks ``fittable_kinds`` and ``trainer_for`` and never lists kinds. Adding a kind is
one new module plus its line in ``KIND_MODULES``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import numpy as np

from engine.errors import ConfigurationError, TokenizerError

# Every id read from a tokenizer file (engine, tiktoken, tokenizer.json) lies in [0, MAX_VOCAB_SIZE),
# and no fit asks for more merges or ids: ids are uint32, and tables sized by the largest id stay
# small (2^24 ids: tens of MB), so a corrupt id or a mistyped size is refused before anything is
# allocated instead of ending in MemoryError.
MAX_VOCAB_SIZE = 1 << 24
# The largest --max-types: 2^40 types, far above what any type table holds.
MAX_TYPES = 1 << 40

__all__ = [
    "KIND_MODULES", "register_tokenizer", "fittable_kinds", "fittable_class", "trainer_for", "FitOptions",
    "Trainer", "TIE_BREAKS", "DEFAULT_MERGES",
]

#: The modules that define tokenizer kinds, in the order ``prepare --help`` lists them. A new kind
#: is a new module with a ``@register_tokenizer`` class, plus its line here.
KIND_MODULES = (
    "engine.tokenizers.char",
    "engine.tokenizers.word",
    "engine.tokenizers.bpe",
    "engine.tokenizers.byte_bpe",
    "engine.tokenizers.sentencepiece",
    "engine.tokenizers.hf_pipeline",
)

# A ``Tokenizer`` subclass: engine.tokenizers.base defines the class and imports this module, so
# the registry names it by its role only.
TokenizerClass = type

_REGISTRY: dict[str, TokenizerClass] = {}  # file kind -> class
_FITTABLE: dict[str, TokenizerClass] = {}  # prepare --tokenizer NAME -> class


def register_tokenizer(cls: TokenizerClass) -> TokenizerClass:
    """Class decorator: ``load_tokenizer`` rebuilds files of ``cls.kind``; ``prepare`` fits ``cls.fit_name``."""
    _REGISTRY[cls.kind] = cls
    if cls.fit_name is not None:
        _FITTABLE[cls.fit_name] = cls
    return cls


def _import_kinds() -> None:
    for module in KIND_MODULES:
        importlib.import_module(module)


# -- fitting -----------------------------------------------------------------------------------

TIE_BREAKS = ("first", "hf")
DEFAULT_MERGES = 200  # merges a BPE fit trains when given neither merges nor a vocabulary size
_IGNORABLE = frozenset({"merges", "unknown", "fit_sample"})  # fit_sample: every kind (the pipeline reads it)


@dataclass(frozen=True)
class FitOptions:
    """What a fit may read, checked on construction (messages use the CLI's spellings).

    ``merges``: merges to train; ``vocab_size``: ids to stop at (specials included); ``pattern``:
    the byte-level pre-tokenizer (``gpt2``, ``cl100k``, ``o200k`` or a regex); ``tie_break``: ``first`` or ``hf``;
    ``unknown``: the token unseen pieces map to, for kinds that have one; ``fit_sample``: fit on at most
    this many UTF-8 bytes of the train partition (the fit sample rule of ``engine.corpus.fit_sample``; an
    int or a string such as ``"64MB"``, stored as the int; every kind; the callers that read the
    training text, ``prepare`` and ``engine tokenizers train``, apply it). None: the kind's default
    (``fit_sample`` None: the whole train partition). ``max_types``: fit on the ``max_types`` most
    frequent types only (the type cap rule of ``engine.tokenizers.type_table``; kinds whose encoders
    take any text or have an unknown token: word, byte-bpe); ``1..MAX_TYPES``.
    """

    merges: int | None = None
    vocab_size: int | None = None
    pattern: str | None = None
    tie_break: str | None = None
    unknown: str | None = None
    fit_sample: int | str | None = None
    max_types: int | None = None

    def __post_init__(self) -> None:
        from engine.checks import MAX_FIT_SAMPLE_BYTES, as_int, byte_count, positive_int
        from engine.tokenizers.pretokenize import canonical_pattern

        for name, flag in (("merges", "--merges"), ("vocab_size", "--vocab-size")):
            value = getattr(self, name)
            if value is not None:
                value = as_int(value, flag, expected="a whole number")
                if not 0 <= value <= MAX_VOCAB_SIZE:  # checked before it sizes anything
                    raise ConfigurationError(f"{flag} must be 0..{MAX_VOCAB_SIZE} (a vocabulary holds at most "
                                             f"{MAX_VOCAB_SIZE} ids), got {value}")
                object.__setattr__(self, name, value)
        if self.max_types is not None:
            object.__setattr__(self, "max_types", positive_int(self.max_types, "--max-types", limit=MAX_TYPES))
        if self.fit_sample is not None:
            object.__setattr__(self, "fit_sample", byte_count(self.fit_sample, "--fit-sample",
                                                              limit=MAX_FIT_SAMPLE_BYTES))
        if self.pattern is not None:
            try:
                object.__setattr__(self, "pattern", canonical_pattern(self.pattern, "--pattern"))
            except TokenizerError as exc:
                raise ConfigurationError(str(exc)) from None
        if self.tie_break is not None and self.tie_break not in TIE_BREAKS:
            raise ConfigurationError(f"--tie-break {self.tie_break!r} is unknown (expected one of: {', '.join(TIE_BREAKS)})")

    def merges_or_default(self) -> int | None:
        """``merges``; else None when ``vocab_size`` bounds the training; else ``DEFAULT_MERGES``."""
        if self.merges is not None or self.vocab_size is not None:
            return self.merges
        return DEFAULT_MERGES

    def given(self) -> list[str]:
        """Names of the options that are set (not None)."""
        return [name for name in ("merges", "vocab_size", "pattern", "tie_break", "unknown", "fit_sample", "max_types")
                if getattr(self, name) is not None]


class Trainer(Protocol):
    """How ``prepare`` fits a kind from training text on any number of threads or machines.

    ``count_types(texts)``: the distinct units of one batch of training texts (``str`` or
    ``bytes``, numbered by first appearance) and their int64 counts; a pure function of the batch,
    safe on any thread, and the trainer pickles (Ray ships it to its workers). Folding the batches
    in stream order (``engine.tokenizers.type_table.TypeCounts``) gives the types of the whole stream, numbered
    by first appearance, with their counts. ``train_from_counts(types, counts)``: the tokenizer
    the same trainer fits on the whole stream at once (same hash). ``span(window, pos, final)``:
    how many characters of ``window`` (at ``pos`` in a long text) may be counted on their own, and
    that text (``engine.tokenizers.streaming``): a long document is counted span by span.
    """

    def count_types(self, texts: Sequence[str]) -> tuple[list, np.ndarray]: ...

    def span(self, window: str, pos: int, final: bool) -> tuple[int, str]: ...

    def train_from_counts(self, types: Sequence, counts: np.ndarray) -> Any: ...  # a Tokenizer


def fittable_kinds() -> tuple[str, ...]:
    """The names ``prepare --tokenizer`` fits, in ``KIND_MODULES`` order."""
    _import_kinds()
    order = {module: i for i, module in enumerate(KIND_MODULES)}
    return tuple(sorted(_FITTABLE, key=lambda name: order.get(_FITTABLE[name].__module__, len(order))))


def fittable_class(name: str) -> TokenizerClass:
    """The class ``prepare --tokenizer name`` fits; ConfigurationError naming the known names."""
    _import_kinds()
    cls = _FITTABLE.get(name)
    if cls is None:
        raise ConfigurationError(f"tokenizer kind {name!r} is unknown (expected one of: {', '.join(fittable_kinds())})")
    return cls


def trainer_for(name: str, options: FitOptions | None = None) -> Trainer:
    """The ``Trainer`` of kind ``name`` with ``options``, checked before any text is read."""
    cls = fittable_class(name)
    options = options if options is not None else FitOptions()
    for option in options.given():
        if option not in cls.fit_options and option not in _IGNORABLE:
            users = [n for n in fittable_kinds() if option in _FITTABLE[n].fit_options]
            raise ConfigurationError(
                f"--{option.replace('_', '-')} applies to --tokenizer {', '.join(users)}, not {name}")
    return cls.trainer(options)
