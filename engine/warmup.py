"""Compile every Numba kernel into the on-disk cache ahead of the first real run.

Numba compiles a kernel the first time it is called on a machine and caches the machine code
(``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the sources); later processes load it in
milliseconds. ``warmup()`` runs each area of the engine once on a few hundred bytes of text so that
a user's first ``engine prepare``, ``tokenizers train --level byte`` or ``pack_documents`` starts
at warm speed. It is optional: everything also compiles on first use.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

_TEXTS = [
    "First Citizen:\nBefore we proceed any further, hear me speak.\n",
    "All:\nSpeak, speak. 1234 don't we'll \u03b1\u03b2\u03b3 \u043f\u0440\u0438\u0432\u0435\u0442!\n\n  ",
    "You are all resolved rather to die than to famish?\tResolved. resolved.\n",
    # a word and a piece longer than LONG_WORD (64): the encoders' second pass
    "Resolved" + "resolved" * 9 + " " + "=" * 70 + "\n",
]


def _tokenizers() -> None:
    from engine.tokenizers import BpeTrainer, CharTokenizer, WordTokenizer

    for tok in (CharTokenizer.fit(_TEXTS), WordTokenizer.fit(_TEXTS), BpeTrainer(20).train(_TEXTS)):
        tok.decode(tok.encode_document(_TEXTS[0], "warmup"))


def _byte_level() -> None:
    from engine.tokenizers import BpeTrainer

    # each named pattern compiles its own scanner; any regex compiles the one matcher (one type for all)
    for pattern in ("gpt2", "cl100k", "o200k", r"\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"):
        for tie_break in ("first", "hf"):
            tok = BpeTrainer(level="byte", vocab_size=300, pattern=pattern, tie_break=tie_break).train(_TEXTS)
            tok.encode_batch(_TEXTS * 2, threads=2)
            tok.decode(tok.encode_document(_TEXTS[1], "warmup"))


def _prepare() -> None:
    import json

    from engine.pipeline import prepare

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        text = "".join(_TEXTS)  # every document holds every character, whichever partition it lands in
        corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": text[i:]}) + "\n" for i in range(12)),
                          encoding="utf-8")
        for kind in ("bpe", "char", "word"):
            prepare(corpus, None, Path(tmp) / kind, tokenizer=kind, merges=20, context_length=4,
                    hash_split={"train": 0.5, "validation": 0.25, "test": 0.25}, quiet=True)


def _batches() -> None:
    import numpy as np

    from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
    from engine.partition import Partition
    from engine.store import EncodedDocument
    from engine.windows import CausalWindowConfig, sample_windows

    docs = [EncodedDocument(f"d{i}", Partition.TRAIN, np.arange(i + 10, dtype=np.uint32)) for i in range(8)]
    for order in (BatchOrder.sequential(), BatchOrder.shuffled(7)):
        epoch = MiniBatchEpoch.build(docs, Partition.TRAIN, windows=CausalWindowConfig(4, 2),
                                     batches=MiniBatchConfig(4, order))
        epoch.batch(epoch.batch_count - 1)
    flagged = [EncodedDocument(d.id, d.partition, d.tokens, np.ones(d.tokens.shape[0], np.uint8)) for d in docs]
    epoch = MiniBatchEpoch.build(flagged, Partition.TRAIN, windows=CausalWindowConfig(4, 2),
                                 batches=MiniBatchConfig(4, BatchOrder.sequential()))
    epoch.batch(0)  # loss weights of documents with role flags (chat data)
    sample_windows(np.arange(64, dtype=np.uint32), 4, 8, seed=1)


def _packing() -> None:
    import numpy as np

    from engine.partition import Partition
    from engine.masks import attention_mask, varlen_boundaries
    from engine.packing import pack_documents
    from engine.store import EncodedDocument

    docs = [EncodedDocument(f"d{i}", Partition.TRAIN, np.arange(3 * i + 5, dtype=np.uint32)) for i in range(8)]
    for strategy in ("bfd", "sequential"):
        packed = pack_documents(docs, 16, strategy=strategy)
        for kind in ("dense", "additive"):
            attention_mask(packed.segment_ids, kind, device="cpu")
        varlen_boundaries(packed.segment_ids, device="cpu")


def _export() -> None:
    import numpy as np

    from engine.kernels.export import gather_documents, wrap_documents, wrapped_lengths

    values, offsets = np.arange(6, dtype=np.uint32), np.array([0, 2, 6], dtype=np.int64)
    values.flags.writeable = offsets.flags.writeable = False  # as the store's Arrow views are
    for dtype in (np.uint16, np.int32, np.uint32):  # the dtypes export writes
        gather_documents(values, offsets, 0, True, np.empty(6, dtype), np.empty(2, np.int32))
        raw = values.astype(dtype)
        raw.flags.writeable = False  # as a memory-mapped .bin is
        wrapped = np.empty(3, np.int64)
        wrapped_lengths(raw, offsets, 0, 1, wrapped)
        wrap_documents(raw, offsets, 0, 1, wrapped, np.empty(int(wrapped[-1]), np.uint32))


#: (area, what it compiles); ``engine warmup --only AREA`` runs one.
AREAS: dict[str, Callable[[], None]] = {
    "tokenizers": _tokenizers,
    "byte_bpe": _byte_level,
    "prepare": _prepare,
    "batches": _batches,
    "packing": _packing,
    "export": _export,
}


def warmup(areas=None, *, report: Callable[[str, float], None] | None = None) -> dict[str, float]:
    """Run each area once (all by default); returns seconds per area (compiling or loading from cache)."""
    timings = {}
    for name in areas or AREAS:
        started = time.perf_counter()
        AREAS[name]()
        timings[name] = time.perf_counter() - started
        if report is not None:
            report(name, timings[name])
    return timings
