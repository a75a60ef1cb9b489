"""Pack documents into rows of ``L`` input/target positions with segment ids.

The packing rules (cited as "the packing rules of engine.packing"):

- A row of length ``L`` holds several documents, or pieces of long documents, as *segments*; each
  segment has a segment id unique inside its row, and its position ids restart at 0.
- Packing works in input/target space: a segment built from source tokens ``z[a : b+1]`` fills
  ``b - a`` positions with inputs ``z[a:b]`` and targets ``z[a+1:b+1]``, so no target ever crosses
  a segment. A document of ``n`` tokens has ``n - 1`` transitions; one longer than a row is cut into
  pieces of at most ``L`` transitions that overlap by one source token — piece ``i`` is
  ``z[i*L : min((i+1)*L, n-1) + 1]`` — so every transition inside the document is scored exactly once.
  A document of fewer than 2 tokens has no transition: it is skipped and listed in
  ``PackedBatch.skipped_documents``.
- Unused positions are padding: segment id ``-1``, never scored (loss weight 0), and they attend
  to nothing real (the attention rule of ``engine.masks``); changing a padding value changes no
  real output.
- Loss weights: a per-token role flag (1 = trained to produce it, e.g. a response token) is shifted
  with the targets: the weight at input position ``t`` of a segment is the flag of its target, the
  source token ``t + 1``. Without flags every real target is scored.

Strategies (both deterministic):
- ``"bfd"`` best-fit decreasing: pieces sorted by length, longest first, ties in document order
  (then piece order); each goes to the row with the smallest remaining capacity that fits, the
  lowest row index among equal capacities; a new row opens when none fits. ``O(P (log L + log R))``.
- ``"sequential"`` next-fit in document order: a piece that does not fit the last row opens a
  new row; rows never go back, so rows read in document order. ``O(P)``.
Inside a row, segment ids are 0, 1, 2, ... in placement order, which is also left-to-right.

Row arrays ``[rows, L]``: ``inputs``/``targets`` uint32 (or the ``dtype=`` asked: int32, int64; 0 on
padding), ``segment_ids`` int32 (-1 on padding), ``position_ids`` int32 (restart at 0 per segment, 0 on padding),
``loss_weights`` uint8 (1 = scored, 0 = not: padding, or a target whose role flag is 0).
Cost: ``O(D + P log L + tokens)``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from engine.buffers import as_token_buffers
from engine.checks import check_count, check_output_folder, positive_int
from engine.errors import ConfigurationError, PackingError
from engine.kernels import packing as kernels
from engine.parallel import resolve_threads
from engine.testhook import stop_point
from engine.windows import check_int32_rows, row_dtype

__all__ = ["PackedBatch", "PackingPlan", "pack_documents", "plan_packing", "write_packed", "STRATEGIES", "PACKED_FILES"]

STRATEGIES = ("bfd", "sequential")


@dataclass(frozen=True)
class PackingPlan:
    """Where every piece goes. Pieces are listed in document order (piece order inside a document)."""

    row_length: int
    rows: int
    piece_document: np.ndarray  # int64: index of the source document
    piece_source_start: np.ndarray  # int64: first source token, offset inside the document
    piece_length: np.ndarray  # int64: positions filled (= transitions scored)
    piece_row: np.ndarray  # int64
    piece_column: np.ndarray  # int64: first position inside the row
    piece_segment: np.ndarray  # int32: segment id inside the row
    skipped_documents: np.ndarray  # int64: documents with fewer than 2 tokens

    @property
    def real_positions(self) -> int:
        return int(self.piece_length.sum())

    @property
    def fill_efficiency(self) -> float:
        """Real positions / all positions (``rows * L``); 0.0 when there are no rows."""
        return self.real_positions / (self.rows * self.row_length) if self.rows else 0.0


# Positions and segment ids are int32, and cu_seqlens index rows with int32.
MAX_ROW_LENGTH = 2**31 - 1
INT64_MAX = 2**63 - 1


def _check_row_length(row_length: Any) -> int:
    row_length = check_count(row_length, "row_length", low=1)
    if row_length > MAX_ROW_LENGTH:
        raise ConfigurationError(
            f"row_length={row_length}: expected at most {MAX_ROW_LENGTH} (position and segment ids are int32)"
        )
    return int(row_length)


def _memory_limit() -> int:
    """Physical memory in bytes (a generous ceiling for one allocation); 2**62 where unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**62


def _bfd_scratch(pieces: int, row_length: int) -> tuple[np.ndarray, ...]:
    """The work arrays of ``kernels.best_fit_decreasing``, allocated here so the kernel compiles no
    allocation routine of its own."""
    words = (row_length >> 6) + 1
    return (
        np.zeros(row_length + 2, dtype=np.int64), np.empty(row_length + 2, dtype=np.int64),
        np.empty(pieces, dtype=np.int64), np.zeros(words, dtype=np.uint64),
        np.zeros((words >> 6) + 1, dtype=np.uint64), np.full(row_length + 1, -1, dtype=np.int32),
        np.empty(pieces, dtype=np.int32), np.empty(pieces, dtype=np.int32), np.zeros(pieces, dtype=np.int32),
    )


def _plan_from_offsets(offsets: np.ndarray, row_length: int, strategy: str) -> PackingPlan:
    if strategy not in STRATEGIES:
        raise ConfigurationError(f"strategy={strategy!r} is not one of {STRATEGIES}")
    documents = offsets.shape[0] - 1
    # Pieces per document: ceil((n - 1) / L), none when n < 2 (lengths leave room for + L in int64).
    transitions = np.diff(offsets) - 1
    pieces = int(np.where(transitions > 0, (transitions + (row_length - 1)) // row_length, 0).sum())
    # Six int64 arrays per piece, and best-fit keeps 12 bytes of buckets per possible capacity.
    needed = pieces * 48 + (12 * row_length if strategy == "bfd" else 0)
    if needed > _memory_limit():
        raise PackingError(
            f"packing {documents} documents into rows of {row_length} makes {pieces} pieces; the plan needs "
            f"{needed:,} bytes, more than this machine's memory (expected a smaller row_length or fewer tokens)"
        )
    piece_document = np.empty(pieces, dtype=np.int64)
    piece_source_start = np.empty(pieces, dtype=np.int64)
    piece_length = np.empty(pieces, dtype=np.int64)
    kernels.cut_pieces(offsets, row_length, piece_document, piece_source_start, piece_length)
    piece_row = np.empty(pieces, dtype=np.int64)
    piece_column = np.empty(pieces, dtype=np.int64)
    piece_segment = np.empty(pieces, dtype=np.int32)
    if strategy == "bfd":
        rows = int(kernels.best_fit_decreasing(piece_length, row_length, piece_row, piece_column, piece_segment,
                                               *_bfd_scratch(pieces, row_length)))
    else:
        rows = int(kernels.next_fit(piece_length, row_length, piece_row, piece_column, piece_segment))
    return PackingPlan(
        row_length=row_length,
        rows=rows,
        piece_document=piece_document,
        piece_source_start=piece_source_start,
        piece_length=piece_length,
        piece_row=piece_row,
        piece_column=piece_column,
        piece_segment=piece_segment,
        skipped_documents=np.flatnonzero(np.diff(offsets) < 2).astype(np.int64),
    )


def plan_packing(document_lengths: Any, row_length: int, *, strategy: str = "bfd") -> PackingPlan:
    """Plan rows for documents of ``document_lengths`` source tokens (no tokens needed)."""
    row_length = _check_row_length(row_length)
    try:
        lengths = np.asarray(document_lengths)
    except (ValueError, TypeError) as exc:
        raise PackingError(f"document_lengths: expected a 1-D array of integers >= 0 ({exc})") from None
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu" or (lengths.size and lengths.min() < 0):
        raise PackingError(f"document_lengths: expected a 1-D array of integers >= 0, got {lengths.dtype} {lengths.shape}")
    if lengths.size and int(lengths.max()) > INT64_MAX - row_length:
        # The kernels round lengths up to whole rows in int64: keep ``length + L`` representable.
        raise PackingError(
            f"document_lengths: a length of {int(lengths.max())} is too large; expected at most "
            f"2**63 - 1 - row_length = {INT64_MAX - row_length}"
        )
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths.astype(np.int64, copy=False), out=offsets[1:])
    # Adding a non-negative int64 can only make the running sum smaller by wrapping around.
    if lengths.size and (offsets[1:] < offsets[:-1]).any():
        raise PackingError("document_lengths: the lengths sum to more than 2**63 - 1 tokens; expected a total that fits int64")
    return _plan_from_offsets(offsets, row_length, strategy)


@dataclass(frozen=True)
class PackedBatch:
    """Packed rows ``[rows, L]`` and one provenance record per segment (row-major order)."""

    row_length: int
    strategy: str
    inputs: np.ndarray  # uint32 [rows, L] (or the dtype asked)
    targets: np.ndarray  # uint32 [rows, L] (or the dtype asked)
    segment_ids: np.ndarray  # int32 [rows, L], -1 = padding
    position_ids: np.ndarray  # int32 [rows, L], 0 on padding
    loss_weights: np.ndarray  # uint8 [rows, L], 1 = scored
    segment_row: np.ndarray  # int64 [segments]
    segment_id: np.ndarray  # int32 [segments], id inside its row
    segment_column: np.ndarray  # int64 [segments], first position inside its row
    segment_document: np.ndarray  # int64 [segments], index into document_ids
    segment_source_start: np.ndarray  # int64 [segments], first source token inside the document
    segment_length: np.ndarray  # int64 [segments], positions (= transitions)
    document_ids: tuple[str, ...]
    skipped_documents: np.ndarray  # int64: indices of documents with fewer than 2 tokens

    def __repr__(self) -> str:  # a summary: the arrays are the batch's bulk
        return (f"{type(self).__name__}({self._repr_fields()}rows={self.rows}, L={self.row_length}, "
                f"strategy={self.strategy!r}, segments={self.segments}, fill={self.fill_efficiency:.2%}, "
                f"scored_targets={self.scored_targets}, dtype={self.inputs.dtype})")

    def _repr_fields(self) -> str:
        return ""

    @property
    def rows(self) -> int:
        return int(self.inputs.shape[0])

    @property
    def segments(self) -> int:
        return int(self.segment_row.shape[0])

    @property
    def real_positions(self) -> int:
        return int(self.segment_length.sum())

    @property
    def scored_targets(self) -> int:
        """Positions whose loss counts: the denominator of a token-weighted mean (engine.loss)."""
        return int(self.loss_weights.sum(dtype=np.int64))

    @property
    def fill_efficiency(self) -> float:
        """Real positions / all positions; 0.0 for an empty batch."""
        return self.real_positions / self.inputs.size if self.inputs.size else 0.0

    @cached_property
    def _varlen(self) -> tuple[np.ndarray, int]:
        from engine.masks import varlen_boundaries

        return varlen_boundaries(self.segment_ids, device="cpu")

    @property
    def cu_seqlens(self) -> np.ndarray:
        """int32 run starts over the flattened ``[rows * L]`` tokens, then ``rows * L``; see
        ``engine.masks.varlen_boundaries`` (a row's trailing padding is one sequence of its own)."""
        return self._varlen[0]

    @property
    def max_seqlen(self) -> int:
        return self._varlen[1]

    def segment(self, k: int) -> dict:
        """Provenance of segment ``k``: row, segment id, column, document index and id, source start, length."""
        document = int(self.segment_document[k])
        return {
            "row": int(self.segment_row[k]),
            "segment_id": int(self.segment_id[k]),
            "column": int(self.segment_column[k]),
            "document_index": document,
            "document_id": self.document_ids[document],
            "source_start": int(self.segment_source_start[k]),
            "length": int(self.segment_length[k]),
        }


def _flat_documents(documents: Any, split: Any) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """(values uint32, offsets int64, ids) of any token-buffer source (``as_token_buffers``)."""
    buffers = as_token_buffers(documents, split, error=PackingError)
    return buffers.values, buffers.offsets, buffers.ids


def _flat_roles(roles: Any, offsets: np.ndarray, ids: tuple[str, ...]) -> np.ndarray:
    """Role flags as uint8 aligned with the flat values; every flag must be 0 or 1."""
    if isinstance(roles, np.ndarray) and roles.ndim == 1 and roles.shape[0] == offsets[-1]:
        flat = roles
    else:
        roles = list(roles)
        if len(roles) != len(ids):
            raise PackingError(f"roles: expected one array per document ({len(ids)}), got {len(roles)}")
        for d, flags in enumerate(roles):
            expected = offsets[d + 1] - offsets[d]
            if np.shape(flags) != (expected,):
                raise PackingError(
                    f"roles for document {ids[d]!r}: expected {expected} flags (one per token), got shape {np.shape(flags)}"
                )
        flat = np.concatenate([np.asarray(r) for r in roles]) if roles else np.empty(0, np.uint8)
    bad = np.flatnonzero((flat != 0) & (flat != 1))
    if bad.size:
        position = int(bad[0])
        d = int(np.searchsorted(offsets, position, side="right") - 1)
        raise PackingError(
            f"roles for document {ids[d]!r} at offset {position - offsets[d]}: got {flat[position]}, expected 0 or 1"
        )
    return flat.astype(np.uint8)


# Positions per thread when filling rows: below this, one thread copies faster than a pool starts.
FILL_POSITIONS_PER_THREAD = 1 << 22


def _fill_rows(values, offsets, flags, has_roles: bool, plan: PackingPlan, outputs: tuple,
               positions_per_thread: int = FILL_POSITIONS_PER_THREAD) -> None:
    """Copy every piece into its span, on up to ``resolve_threads()`` threads, one per
    ``positions_per_thread`` positions.

    Threads take contiguous, disjoint ranges of pieces and each piece owns its span, so the rows
    do not depend on the thread count.
    """
    pieces = plan.piece_length.shape[0]
    threads = min(resolve_threads(), pieces, plan.real_positions // positions_per_thread)

    def fill(first: int, stop: int) -> None:
        kernels.fill_rows(values, offsets, flags, has_roles, plan.piece_document, plan.piece_source_start,
                          plan.piece_length, plan.piece_row, plan.piece_column, plan.piece_segment, *outputs,
                          first, stop)

    if threads <= 1:
        fill(0, pieces)
        return
    bounds = [pieces * k // threads for k in range(threads + 1)]
    with ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(fill, bounds[k], bounds[k + 1]) for k in range(threads)]:
            future.result()


def pack_documents(
    documents: Any,
    row_length: int,
    strategy: str = "bfd",
    roles: Any = None,
    *,
    split: Any = None,
    dtype: Any = None,
    fill_positions_per_thread: int = FILL_POSITIONS_PER_THREAD,
) -> PackedBatch:
    """Pack ``documents`` into rows of ``row_length`` positions.

    ``documents``: a list of ``EncodedDocument`` (one partition), a ``(values uint32, offsets
    int64, ids)`` triple, ``TokenBuffers``, or a ``TokenStore`` with ``split=``. ``roles``: None (the
    documents' own flags, from a store with roles; else every real target scored) or 0/1 flags per
    source token, one array per document or one flat array aligned
    with ``values``. ``dtype``: the dtype of ``inputs`` and ``targets``, uint32 (default), int32
    or int64 (what ``torch.nn.Embedding`` takes). ``fill_positions_per_thread``: rows are filled on
    one thread per that many positions (at most ``resolve_threads()``), never changing a value.
    """
    row_length = _check_row_length(row_length)
    fill_positions_per_thread = positive_int(fill_positions_per_thread, "fill_positions_per_thread")
    dtype = row_dtype(dtype, None)
    buffers = as_token_buffers(documents, split, error=PackingError)
    values, offsets, ids = buffers.values, buffers.offsets, buffers.ids
    if roles is None:
        roles = buffers.roles  # a store with roles (chat data) weights the loss by them
    flags = np.zeros(1, np.uint8) if roles is None else _flat_roles(roles, offsets, ids)
    plan = _plan_from_offsets(offsets, row_length, strategy)
    shape = (plan.rows, row_length)
    needed = plan.rows * row_length * 17  # inputs, targets, segment and position ids, loss weights
    if needed > _memory_limit():
        raise PackingError(
            f"{plan.rows} rows of {row_length} positions need {needed:,} bytes, more than this machine's memory; "
            "expected a smaller row_length"
        )
    inputs = np.zeros(shape, dtype)
    targets = np.zeros(shape, dtype)
    segment_ids = np.full(shape, -1, np.int32)
    position_ids = np.zeros(shape, np.int32)
    loss_weights = np.zeros(shape, np.uint8)
    _fill_rows(values, offsets, flags, roles is not None, plan, (inputs, targets, segment_ids, position_ids, loss_weights),
               fill_positions_per_thread)
    if dtype == np.int32:
        check_int32_rows(inputs, targets)
    order = np.empty(plan.piece_length.shape[0], np.int64)
    kernels.row_index(plan.piece_row, plan.piece_segment, plan.rows, np.empty(plan.rows + 1, np.int64), order)
    return PackedBatch(
        row_length=row_length,
        strategy=strategy,
        inputs=inputs,
        targets=targets,
        segment_ids=segment_ids,
        position_ids=position_ids,
        loss_weights=loss_weights,
        segment_row=plan.piece_row[order],
        segment_id=plan.piece_segment[order],
        segment_column=plan.piece_column[order],
        segment_document=plan.piece_document[order],
        segment_source_start=plan.piece_source_start[order],
        segment_length=plan.piece_length[order],
        document_ids=ids,
        skipped_documents=plan.skipped_documents,
    )


def _list_column(rows: np.ndarray) -> Any:
    """A ``large_list`` column over a ``[rows, L]`` array without copying per row."""
    import pyarrow as pa

    count, length = rows.shape
    offsets = pa.array(np.arange(count + 1, dtype=np.int64) * length)
    return pa.LargeListArray.from_arrays(offsets, pa.array(rows.reshape(-1)))


PACKED_FILES = ("rows.parquet", "segments.parquet")


def write_packed(packed: PackedBatch, out_dir: str | os.PathLike) -> None:
    """Write ``packed`` as ``out_dir/rows.parquet`` (list columns inputs, targets, segment_ids,
    position_ids, loss_weights; one Parquet row per packed row) and ``out_dir/segments.parquet``
    (provenance: row, segment_id, column, document_id, source_start, length), atomically: into a
    temporary directory renamed into place. ``out_dir`` must be new or an earlier output of this
    function, and not a symbolic link (ConfigurationError otherwise: nothing else is ever replaced).

    The temporaries beside it are ``.NAME.staging-<pid>`` (holding a ``.engine-staging`` marker) and
    ``.NAME.previous`` (the earlier output, between the two renames); those of dead runs are removed
    before writing, and only when they hold nothing but what this function writes."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise ConfigurationError(f"--out {out_dir}: is a symbolic link; the output folder is replaced as a whole, "
                                 f"which would replace the link: give the folder itself ({os.path.realpath(out_dir)})")
    # replacing it must never delete a store (the marker: a run killed right after its rename)
    check_output_folder(out_dir, PACKED_FILES + (_STAGING_MARKER,), "engine pack")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_temporaries(out_dir)
    staging = out_dir.with_name(f".{out_dir.name}.staging-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)  # our own pid's: a run in this process that failed
    staging.mkdir()
    (staging / _STAGING_MARKER).touch()
    try:
        rows = pa.table({
            name: _list_column(getattr(packed, name))
            for name in ("inputs", "targets", "segment_ids", "position_ids", "loss_weights")
        })
        pq.write_table(rows, staging / "rows.parquet")
        segments = pa.table({
            "row": packed.segment_row,
            "segment_id": packed.segment_id,
            "column": packed.segment_column,
            "document_id": pa.array([packed.document_ids[d] for d in packed.segment_document.tolist()], pa.string()),
            "source_start": packed.segment_source_start,
            "length": packed.segment_length,
        })
        pq.write_table(segments, staging / "segments.parquet")
        if out_dir.exists():
            previous = out_dir.with_name(f".{out_dir.name}.previous")
            os.replace(out_dir, previous)
            stop_point("pack-swap")
            os.replace(staging, out_dir)
            shutil.rmtree(previous)
        else:
            os.replace(staging, out_dir)
        (out_dir / _STAGING_MARKER).unlink()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


_STAGING_MARKER = ".engine-staging"


def _remove_dead_temporaries(out_dir: Path) -> None:
    """Remove the temporaries of dead ``write_packed`` runs beside ``out_dir``: staging folders of a dead
    pid that hold the marker and nothing but packed files, and ``.NAME.previous`` when it holds only
    packed files (restored as ``out_dir`` when a run was killed between its two renames)."""
    import shutil

    from engine.store.lock import pid_alive

    ours = set(PACKED_FILES) | {_STAGING_MARKER}
    for entry in out_dir.parent.iterdir():
        name = entry.name
        prefix = f".{out_dir.name}.staging-"
        if name.startswith(prefix) and name[len(prefix):].isascii() and name[len(prefix):].isdigit():
            if (not entry.is_symlink() and entry.is_dir() and not pid_alive(int(name[len(prefix):]))
                    and (entry / _STAGING_MARKER).is_file() and {p.name for p in entry.iterdir()} <= ours):
                shutil.rmtree(entry)
    previous = out_dir.with_name(f".{out_dir.name}.previous")
    if not (previous.exists() or previous.is_symlink()):
        return
    if not previous.is_dir() or previous.is_symlink() or not {p.name for p in previous.iterdir()} <= ours:
        raise ConfigurationError(f"{previous}: exists and is not an earlier `engine pack` output (the name it "
                                 "moves its earlier output to while replacing it); move it away")
    if out_dir.exists():
        shutil.rmtree(previous)
    else:  # killed between the renames: the earlier output comes back
        os.replace(previous, out_dir)
