"""Causal windows: one input/target pair cut from ONE encoded document.

The rule (every caller of windows cites it here, as "the window rule of engine.windows"). For one
encoded document ``z`` of ``n = len(z)`` tokens, context length ``T >= 1`` and stride ``S >= 1``:

- candidate starts are ``s = k*S`` for ``k = 0, 1, 2, ...``; a start yields a window iff
  ``s + T < n`` (the ``T + 1`` source tokens ``z[s], ..., z[s+T]`` all exist);
- the window at ``s`` is input ``x = z[s : s+T]`` and target ``y = z[s+1 : s+T+1]``: target ``i`` is
  the token right after input ``i``, so the last target of a window may be the document's EOS;
- ``count(n) = 0 if n < T + 1 else (n - (T + 1)) // S + 1``, exact for every 64-bit size (Python
  ints here; the int64 kernels clamp ``T`` and ``S`` where no count can change, see below);
- the *incomplete tail* is the suffix ``z[c*S:]`` at the first candidate start that cannot fill a
  window (``c = count(n)``), or nothing when ``c*S >= n``; it may overlap the last windows (it is
  what is left too short to START another window, not tokens thrown away);
- ``T = 0``, ``S = 0``, ``T + 1 >= 2^64`` (``T`` above ``2^64 - 2``) or ``S`` above ``2^64 - 1`` are a
  ``ConfigurationError``;
- windows restart at every document and at every partition boundary: no window holds tokens of two
  documents, and a partition is never flattened into one stream.

Random sampling with replacement from ONE continuous stream of ``N`` tokens (the classic
``get_batch``, ``sample_windows``) is the exception that reads a stream: each start is drawn
uniformly from the ``N - T`` valid starts ``0 .. N - T - 1`` by ``sample_below(N - T)`` of SplitMix64
seeded with ``seed`` (``engine.kernels.shuffle``), one draw per row in row order; same seed, same batch.

``CausalWindowConfig`` holds ``T`` and ``S`` and works on one document (Python ints, so counts never
overflow; windows are zero-copy numpy views). The array functions work on a whole partition's
``(values uint32, offsets int64)`` buffers through the kernels in ``engine.kernels.windows``:
per-document counts and prefix sums (one pass over ``offsets``), descriptors in document order
(one int64 write per window), and gathering rows straight into the final ``[rows, T]`` arrays.
``sample_windows`` is the classic random batch from one continuous stream.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Sequence

import numpy as np

from engine.checks import INT64_MAX, UINT64_MAX, as_int, check_seed
from engine.checks import positive_int as _positive_int
from engine.errors import ConfigurationError
from engine.kernels import shuffle as shuffle_kernels
from engine.kernels import windows as kernels

__all__ = [
    "CausalWindowConfig",
    "Window",
    "IncompleteTail",
    "SampledBatch",
    "document_window_counts",
    "window_prefix_sums",
    "enumerate_windows",
    "gather_windows",
    "sample_windows",
]

ROW_DTYPES = (np.dtype(np.uint32), np.dtype(np.int32), np.dtype(np.int64))


class Window(NamedTuple):
    """One complete pair: ``input`` and ``target`` are views of the document's tokens."""

    start: int
    input: np.ndarray
    target: np.ndarray


class IncompleteTail(NamedTuple):
    """The suffix at the first candidate start too short for a window (may overlap earlier windows)."""

    start: int
    tokens: np.ndarray


@dataclass(frozen=True, slots=True)
class CausalWindowConfig:
    """Context length ``T`` (input and target length) and stride ``S`` (distance between starts)."""

    context_length: int
    stride: int = 1

    def __post_init__(self) -> None:
        # Sizes are 64-bit unsigned: T + 1 must be representable (T <= 2^64 - 2), S <= 2^64 - 1.
        context_length = _positive_int(
            self.context_length, "context length T", limit=UINT64_MAX - 1, why=" (T + 1 must fit in 64 bits)"
        )
        stride = _positive_int(self.stride, "stride S", limit=UINT64_MAX)
        object.__setattr__(self, "context_length", context_length)
        object.__setattr__(self, "stride", stride)

    @property
    def kernel_context_length(self) -> int:
        """T for int64 kernels. A T of 2^63 - 1 or more already exceeds any array (which holds fewer
        than 2^63 - 1 tokens), so clamping it there changes no count, start or tail."""
        return min(self.context_length, INT64_MAX - 1)

    @property
    def kernel_stride(self) -> int:
        """S for int64 kernels: ``(n - (T + 1)) // S`` is 0 for every S >= 2^63 - 1 and array size n,
        so clamping S to 2^63 - 1 is exact."""
        return min(self.stride, INT64_MAX)

    @property
    def required_source_tokens(self) -> int:
        """``T + 1``: the source ids one window needs."""
        return self.context_length + 1

    def window_count(self, length: int) -> int:
        """Windows of one document of ``length`` tokens (exact for any size: Python ints)."""
        length = as_int(length, "document length")
        if length < 0:
            raise ConfigurationError(f"document length must be >= 0, got {length}")
        required = self.required_source_tokens
        return 0 if length < required else (length - required) // self.stride + 1

    def window_counts(self, offsets: np.ndarray) -> np.ndarray:
        """Windows per document of a partition's int64 ``offsets`` (kernel; int64 array)."""
        return document_window_counts(offsets, self)

    def windows(self, tokens) -> "CausalWindows":
        """Every complete window of ONE document, in start order; no ids are copied."""
        return CausalWindows(self, _document_tokens(tokens))

    def incomplete_tail(self, tokens) -> IncompleteTail | None:
        """The suffix at the first start that cannot fill a window; None if that start is past the end."""
        tokens = _document_tokens(tokens)
        start = self.window_count(tokens.shape[0]) * self.stride
        if start >= tokens.shape[0]:
            return None
        return IncompleteTail(start, tokens[start:])


class CausalWindows(Sequence[Window]):
    """The windows of one document as a sequence: ``len``, indexing and iteration, all zero-copy."""

    __slots__ = ("config", "tokens", "_count")

    def __init__(self, config: CausalWindowConfig, tokens: np.ndarray) -> None:
        self.config = config
        self.tokens = tokens
        self._count = config.window_count(tokens.shape[0])

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        index = operator.index(index)
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(f"window {index} out of range: this document has {self._count} windows")
        start = index * self.config.stride
        end = start + self.config.context_length
        return Window(start, self.tokens[start:end], self.tokens[start + 1 : end + 1])

    def __iter__(self) -> Iterator[Window]:
        for index in range(self._count):
            yield self[index]


def _document_tokens(tokens) -> np.ndarray:
    """A 1-D array view of one document's ids (EncodedDocument, ndarray or sequence)."""
    tokens = getattr(tokens, "tokens", tokens)
    array = tokens if isinstance(tokens, np.ndarray) else np.asarray(tokens, dtype=np.uint32)
    if array.ndim != 1:
        raise ConfigurationError(f"document tokens must be 1-D, got an array of shape {array.shape}")
    return array


def check_offsets(offsets, *, value_count: int | None = None, where: str = "offsets") -> np.ndarray:
    """Validate int64 ``offsets``: 1-D, ``0 = o[0] <= o[1] <= ...`` (and ``o[-1] = value_count`` if given)."""
    if not isinstance(offsets, np.ndarray) or offsets.dtype != np.int64 or offsets.ndim != 1:
        raise ConfigurationError(f"{where}: offsets must be a 1-D int64 array, got {_describe(offsets)}")
    end = value_count if value_count is not None else (int(offsets[-1]) if offsets.shape[0] else 0)
    bad = kernels.first_bad_offset(offsets, end)
    if bad >= 0:
        found = "nothing" if offsets.shape[0] == 0 else int(offsets[bad])
        last = "" if value_count is None else f" = len(values) = {value_count}"
        raise ConfigurationError(
            f"{where}: offsets[{bad}] = {found} breaks the rule 0 = offsets[0] <= ... <= offsets[-1]{last} "
            f"(offsets hold documents + 1 entries)"
        )
    return offsets


def check_buffers(values, offsets, *, where: str = "token buffers") -> tuple[np.ndarray, np.ndarray]:
    """Validate a partition's ``(values uint32, offsets int64)``; returns them unchanged (zero-copy)."""
    if not isinstance(values, np.ndarray) or values.dtype != np.uint32 or values.ndim != 1:
        raise ConfigurationError(f"{where}: values must be a 1-D uint32 array, got {_describe(values)}")
    check_offsets(offsets, value_count=values.shape[0], where=where)
    return values, offsets


def _describe(array) -> str:
    if isinstance(array, np.ndarray):
        return f"{array.dtype} array of shape {array.shape}"
    return type(array).__name__


def document_window_counts(offsets: np.ndarray, config: CausalWindowConfig) -> np.ndarray:
    """Windows per document (int64, one per document) from ``offsets``."""
    check_offsets(offsets)
    counts = np.empty(offsets.shape[0] - 1, dtype=np.int64)
    kernels.window_counts(offsets, config.kernel_context_length, config.kernel_stride, counts)
    return counts


def window_prefix_sums(offsets: np.ndarray, config: CausalWindowConfig) -> np.ndarray:
    """``prefix[d]`` = windows of documents before ``d``; ``prefix[-1]`` is the total (int64)."""
    check_offsets(offsets)
    prefix = np.empty(offsets.shape[0], dtype=np.int64)
    kernels.window_prefix_sums(offsets, config.kernel_context_length, config.kernel_stride, prefix)
    return prefix


def enumerate_windows(offsets: np.ndarray, config: CausalWindowConfig) -> tuple[np.ndarray, np.ndarray]:
    """Every window's ``(document_index, start)`` as two int64 arrays, document order then start."""
    prefix = window_prefix_sums(offsets, config)  # checks offsets
    total = int(prefix[-1])
    document_index = np.empty(total, dtype=np.int64)
    start = np.empty(total, dtype=np.int64)
    kernels.enumerate_descriptors(offsets, prefix, config.kernel_stride, document_index, start)
    return document_index, start


def row_dtype(dtype, out) -> np.dtype:
    if dtype is None:
        dtype = out[0].dtype if out is not None and isinstance(out[0], np.ndarray) else np.uint32
    dtype = np.dtype(dtype)
    if dtype not in ROW_DTYPES:
        raise ConfigurationError(f"row dtype must be uint32, int32 or int64, got {dtype}")
    return dtype


INT32_TOO_SMALL = ("a token id is 2^31 or larger and does not fit int32 rows; "
                   "expected dtype=np.int64 or np.uint32")


def check_int32_rows(inputs: np.ndarray, targets: np.ndarray) -> None:
    """int32 rows hold ids below 2^31 only: a larger id would read back negative, so refuse it."""
    if inputs.size and (int(inputs.min()) < 0 or int(targets.min()) < 0):
        raise ConfigurationError(INT32_TOO_SMALL)


def prepare_rows(rows: int, context_length: int, out, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Allocate ``[rows, T]`` inputs and targets, or check ``out`` and return its first ``rows`` rows."""
    # Fast path for the usual reused buffer pair: a batch is microseconds, so checks must be too.
    if dtype is None and type(out) is tuple and len(out) == 2:
        inputs, targets = out
        if type(inputs) is np.ndarray and type(targets) is np.ndarray:
            shape = inputs.shape
            in_flags, out_flags = inputs.flags, targets.flags
            if (len(shape) == 2 and shape == targets.shape and shape[1] == context_length
                    and shape[0] >= rows and inputs.dtype in ROW_DTYPES and targets.dtype == inputs.dtype
                    and in_flags.c_contiguous and in_flags.writeable
                    and out_flags.c_contiguous and out_flags.writeable
                    and not np.may_share_memory(inputs, targets)):
                return (inputs, targets) if shape[0] == rows else (inputs[:rows], targets[:rows])
    dtype = row_dtype(dtype, out)
    if out is None:
        try:
            return np.empty((rows, context_length), dtype=dtype), np.empty((rows, context_length), dtype=dtype)
        except (ValueError, MemoryError):
            nbytes = 2 * rows * context_length * np.dtype(dtype).itemsize
            raise ConfigurationError(
                f"{rows} rows of T = {context_length} tokens need {nbytes:,} bytes of inputs and targets, "
                "more than this machine can allocate; expected a smaller batch size or context length"
            ) from None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ConfigurationError("out must be a pair (inputs, targets) of 2-D arrays")
    for name, array in zip(("inputs", "targets"), out):
        if not isinstance(array, np.ndarray):
            raise ConfigurationError(f"out {name} must be a numpy array, got {type(array).__name__}")
        if array.dtype != dtype:
            raise ConfigurationError(f"out {name} has dtype {array.dtype}, expected {dtype}")
        if array.ndim != 2 or array.shape[1] != context_length or array.shape[0] < rows:
            raise ConfigurationError(
                f"out {name} has shape {array.shape}, expected ({rows}, {context_length}) "
                f"(at least {rows} rows of length T = {context_length})"
            )
        if not array.flags.c_contiguous or not array.flags.writeable:
            raise ConfigurationError(f"out {name} must be C-contiguous and writeable")
    if np.may_share_memory(out[0], out[1]):
        raise ConfigurationError("out inputs and targets must not share memory")
    return out[0][:rows], out[1][:rows]


def gather_windows(
    values: np.ndarray,
    offsets: np.ndarray,
    document_index,
    start,
    context_length: int,
    *,
    out=None,
    dtype=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets ``[rows, T]`` for any list of descriptors ``(document_index, start)``.

    Rows are copied straight from ``values``/``offsets`` into the result (or into ``out``, a pair of
    C-contiguous arrays with at least ``rows`` rows; the first ``rows`` rows are written and returned
    as views). ``dtype`` is uint32 (default, or that of ``out``), int32 or int64. Every descriptor is checked
    to name a complete window (``start + T < document length``) before anything is written.
    """
    T = CausalWindowConfig(context_length).kernel_context_length  # same windows, int64-safe
    check_buffers(values, offsets)
    document_index = np.ascontiguousarray(document_index, dtype=np.int64)
    start = np.ascontiguousarray(start, dtype=np.int64)
    if document_index.shape != start.shape or document_index.ndim != 1:
        raise ConfigurationError(
            f"document_index and start must be 1-D of equal length, got shapes {document_index.shape} "
            f"and {start.shape}"
        )
    documents = offsets.shape[0] - 1
    bad = np.flatnonzero((document_index < 0) | (document_index >= documents))
    if bad.size:
        row = int(bad[0])
        raise ConfigurationError(
            f"descriptor row {row}: document_index {int(document_index[row])} is outside 0..{documents - 1}"
        )
    lengths = offsets[document_index + 1] - offsets[document_index]
    # ``start >= lengths - T`` rather than ``start + T >= lengths``: the sum can wrap past int64.
    bad = np.flatnonzero((start < 0) | (start >= lengths - T))
    if bad.size:
        row = int(bad[0])
        raise ConfigurationError(
            f"descriptor row {row}: start {int(start[row])} in document {int(document_index[row])} "
            f"(length {int(lengths[row])}) is not a complete window for T = {T} (need start + T < length)"
        )
    inputs, targets = prepare_rows(start.shape[0], T, out, dtype)
    kernels.gather_descriptors(values, offsets, document_index, start, T, inputs, targets)
    if inputs.dtype == np.int32:
        check_int32_rows(inputs, targets)
    return inputs, targets


class SampledBatch(NamedTuple):
    """A random batch from one stream: ``inputs``/``targets`` ``[B, T]`` and the ``starts`` drawn (int64)."""

    inputs: np.ndarray
    targets: np.ndarray
    starts: np.ndarray


def sample_windows(tokens, batch_size: int, context_length: int, seed: int, *, dtype=None) -> SampledBatch:
    """The classic random batch from ONE continuous stream, with replacement (module docstring).

    Each of ``batch_size`` starts is ``sample_below(N - T)`` from SplitMix64 seeded with ``seed``
    (uniform over all ``N - T`` valid starts), drawn in row order; same seed, same batch.
    ``dtype``: uint32 (default), int32 or int64 rows.
    """
    config = CausalWindowConfig(context_length)
    T = config.kernel_context_length  # same windows, int64-safe
    rows = _positive_int(batch_size, "batch size")
    state = check_seed(seed)
    stream = _document_tokens(tokens)
    if stream.dtype != np.uint32:
        raise ConfigurationError(f"tokens must be uint32 token ids, got {stream.dtype}")
    stream = np.ascontiguousarray(stream)
    valid_starts = stream.shape[0] - T
    if valid_starts < 1:
        raise ConfigurationError(
            f"a stream of {stream.shape[0]} tokens has no window of T = {config.context_length} "
            f"(needs at least T + 1 = {config.context_length + 1} tokens)"
        )
    inputs, targets = prepare_rows(rows, T, None, dtype)  # before the starts: it names an impossible batch size
    starts = np.empty(rows, dtype=np.int64)
    shuffle_kernels.sample_below_fill(np.uint64(state), np.uint64(valid_starts), starts)
    kernels.gather_positions(stream, starts, T, inputs, targets)
    if inputs.dtype == np.int32:
        check_int32_rows(inputs, targets)
    return SampledBatch(inputs, targets, starts)
