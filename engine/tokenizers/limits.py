"""The sizes tokenizers and trainers cut their work into: they bound memory and time, and but for
``PIECE_CHARS`` (below) never change the ids.

- ``STREAM_CHARS``: a document longer than this many characters is encoded span by span
  (``encode_documents(..., stream_chars=N)``, ``engine.tokenizers.streaming``);
- ``PIECE_CHARS``: the longest span (``encode_documents(..., piece_chars=N)``): a stretch of a document
  this long where no piece ends for certain is cut there (the one limit that can change ids: see
  ``engine.tokenizers.streaming``);
- ``PieceCacheLimits``: the cache of merged pieces a byte-level BPE tokenizer keeps per encoding
  thread (``ByteBpeTokenizer(..., cache=...)``);
- ``WordCacheLimits``: the per-call cache of merged words of character-level BPE
  (``BpeTokenizer(..., cache=...)``);
- ``TrainLimits``: how a BPE trainer cuts its training texts (``BpeTrainer(..., limits=...)``,
  ``ByteBpeTrainer(..., limits=...)``).

The dataclasses are frozen, of positive ints, checked on construction; a test passes small ones to
reach a boundary (evictions, many batches, many spans) on small inputs. They are not part of a
tokenizer file: a loaded tokenizer has the defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engine.checks import positive_int
from engine.errors import ConfigurationError

__all__ = ["STREAM_CHARS", "PIECE_CHARS", "TRAIN_BATCH_BYTES", "LONG_PIECE_WINDOW", "PieceCacheLimits", "WordCacheLimits",
           "TrainLimits"]

# Documents longer than this many characters are encoded span by span (spans of about this size).
# Kernels hold ~40 bytes of scratch per character: 2M characters keep a span near 80 MB.
STREAM_CHARS = 1 << 21
# The most characters one span of a long document may hold: a stretch this long with no place where a
# piece ends for certain (one unbroken piece: DNA, base64, ``"ab" * 75_000_000``) is cut after this
# many characters (``engine.tokenizers.streaming``), so encoding stays bounded for any piece length.
# The one limit that can change ids, and only of such a stretch.
PIECE_CHARS = 1 << 22
# Bytes of one piece that byte-level BPE merges at a time (a longer piece: window by window).
LONG_PIECE_WINDOW = 1 << 20
# Bytes of training text a byte-level BPE trainer counts at a time.
TRAIN_BATCH_BYTES = 4 << 20


def _check_fields(limits) -> None:
    for item in dataclasses.fields(limits):
        object.__setattr__(limits, item.name, positive_int(getattr(limits, item.name), f"{type(limits).__name__}."
                                                           f"{item.name}"))


def _power_of_two(value: int, name: str, low: int) -> None:
    if value < low or value & (value - 1):
        raise ConfigurationError(f"{name} must be a power of two >= {low}, got {value}")


@dataclass(frozen=True)
class PieceCacheLimits:
    """A byte-level BPE tokenizer's cache of merged pieces (``engine.kernels.bpe_encode.new_piece_cache``),
    one per thread that encodes: ``slots`` rows (a power of two >= 64; the cache empties at three
    quarters full: 98k pieces by default), ``pool_bytes`` bytes of the pieces longer than a key and
    ``pool_ids`` ids of the merged pieces. About 6 MB each with the defaults; bounded whatever the input.
    ``long_piece_window``: a piece longer than this many bytes is merged window by window, with the ids of
    the whole piece (``engine.kernels.bpe_merge``: the rule; about 50 bytes of scratch per byte of a window)."""

    slots: int = 1 << 17
    pool_bytes: int = 1 << 20
    pool_ids: int = 1 << 18
    long_piece_window: int = LONG_PIECE_WINDOW

    def __post_init__(self) -> None:
        _check_fields(self)
        _power_of_two(self.slots, "PieceCacheLimits.slots", 64)


@dataclass(frozen=True)
class WordCacheLimits:
    """Character-level BPE's per-call cache of merged words: at most ``slots`` slots (a power of two;
    a call on a short text takes fewer), so memory is bounded whatever the input size."""

    slots: int = 1 << 16

    def __post_init__(self) -> None:
        _check_fields(self)
        _power_of_two(self.slots, "WordCacheLimits.slots", 1)


@dataclass(frozen=True)
class TrainLimits:
    """How a BPE trainer's ``train(texts)`` cuts its texts: a text longer than ``stream_chars``
    characters is counted span by span (``engine.tokenizers.streaming.fit_texts``; a piece longer
    than that counted in parts); a byte-level trainer counts ``batch_bytes`` bytes of texts at a time."""

    stream_chars: int = STREAM_CHARS
    batch_bytes: int = TRAIN_BATCH_BYTES

    def __post_init__(self) -> None:
        _check_fields(self)
