"""``prepare()``: corpus -> tokenizer (fitted on train only) -> token store -> window counts.

The main job behind ``engine prepare``. Steps, each with progress on stderr:

1. read the corpus and assign partitions (split manifest, hash split, or a positional split
   for one continuous text file);
2. fit the tokenizer on the TRAIN partition only, or load an existing tokenizer file;
3. encode every document as ``[BOS, content..., EOS]`` in chunks and write the token store
   (atomic: the output appears complete or not at all);
4. count complete causal windows and incomplete tails per partition (SPEC §5) from the store's
   offsets, and write ``report.json`` beside the store.

Cost: reading and encoding are linear in the corpus; window counting is O(documents).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.corpus import Corpus, CorpusPartitions, Partition, SplitManifest
from engine.errors import ConfigurationError, CorpusError
from engine.progress import Progress
from engine.store import TokenStore
from engine.tokenizers.base import Tokenizer, load_tokenizer

__all__ = ["prepare", "PrepareResult", "default_corpus_paths", "load_partitions", "fit_or_load_tokenizer"]

TOKENIZER_KINDS = ("char", "word", "bpe")
ENCODE_CHUNK_DOCUMENTS = 2048


@dataclass(frozen=True)
class PrepareResult:
    out_dir: Path
    store_path: Path
    tokenizer_path: Path
    report_path: Path
    report: dict


def default_corpus_paths() -> tuple[Path, Path]:
    """The bundled corpus and manifest: ``data/`` of the checkout, else ``./data``."""
    here = Path(__file__).resolve().parent.parent / "data"
    base = here if (here / "corpus.jsonl").exists() else Path("data")
    return base / "corpus.jsonl", base / "splits.json"


def load_partitions(
    corpus_path: str | os.PathLike | None,
    splits_path: str | os.PathLike | None = None,
    *,
    hash_split: dict[str, float] | None = None,
    train_fraction: float = 0.9,
    on_invalid_utf8: str = "error",
    skip_bad_lines: bool = False,
) -> CorpusPartitions:
    """Read a corpus and assign every document to a partition.

    A ``.txt`` file is one continuous text split by position (``train_fraction``). Anything else
    (JSONL, Parquet, a folder) needs ``splits_path`` (a manifest) or ``hash_split`` (ratios).
    With no corpus at all, the bundled ``data/corpus.jsonl`` and ``data/splits.json`` are used.
    """
    if corpus_path is None:
        corpus_path, default_splits = default_corpus_paths()
        if splits_path is None and hash_split is None:
            splits_path = default_splits
    corpus_path = Path(corpus_path)
    if not corpus_path.exists():
        raise CorpusError(f"{corpus_path}: corpus not found (expected a .jsonl, .parquet, .txt file or a folder)")
    if corpus_path.is_file() and corpus_path.suffix == ".txt":
        if splits_path is not None or hash_split is not None:
            raise ConfigurationError(
                f"{corpus_path}: a continuous text is split by position (--train-fraction); "
                "--splits and --hash-split apply to multi-document corpora only"
            )
        text = _read_text(corpus_path, on_invalid_utf8)
        return CorpusPartitions.from_text(text, train_fraction, name=corpus_path.stem)
    if splits_path is not None and hash_split is not None:
        raise ConfigurationError("pass either --splits FILE or --hash-split RATIOS, not both")
    if splits_path is None and hash_split is None:
        raise ConfigurationError(
            f"{corpus_path}: a multi-document corpus needs a split: pass --splits FILE (a manifest "
            '{"train": [...], "validation": [...], "test": [...]}) or --hash-split 0.8,0.1,0.1'
        )
    corpus = Corpus.from_path(corpus_path, on_invalid_utf8=on_invalid_utf8, skip_bad_lines=skip_bad_lines)
    manifest = SplitManifest.from_json(splits_path) if splits_path is not None else SplitManifest.by_hash(hash_split)
    return manifest.partition(corpus)


def _read_text(path: Path, on_invalid_utf8: str) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if on_invalid_utf8 == "replace":
            return raw.decode("utf-8", errors="replace")
        if on_invalid_utf8 == "skip":
            return raw.decode("utf-8", errors="ignore")
        raise CorpusError(
            f"{path}: invalid UTF-8 at byte offset {exc.start} (byte 0x{raw[exc.start]:02x}); "
            "expected UTF-8 text (use --on-invalid-utf8 replace|skip to continue)"
        ) from None


def fit_or_load_tokenizer(
    tokenizer: str, train_texts: list[str], *, merges: int = 200, quiet: bool = True
) -> Tokenizer:
    """``tokenizer`` is a kind (char, word, bpe) fitted on ``train_texts``, or a tokenizer file."""
    if tokenizer not in TOKENIZER_KINDS:
        path = Path(tokenizer)
        if path.exists():
            return load_tokenizer(path)
        raise ConfigurationError(
            f"--tokenizer {tokenizer!r}: expected one of {', '.join(TOKENIZER_KINDS)} or an existing tokenizer file"
        )
    from engine.tokenizers import BpeTrainer, CharTokenizer, WordTokenizer

    with Progress(f"fitting {tokenizer} tokenizer", unit="docs", quiet=quiet) as bar:
        if tokenizer == "char":
            tok = CharTokenizer.fit(train_texts)
        elif tokenizer == "word":
            tok = WordTokenizer.fit(train_texts, unknown="<unk>")
        else:
            tok = BpeTrainer(merges=merges).train(train_texts)
        bar.update(len(train_texts), sum(len(t) for t in train_texts))
    return tok


def window_counts(offsets: np.ndarray, context_length: int, stride: int) -> dict[str, int]:
    """Complete windows, incomplete tails and tail tokens over documents given by ``offsets`` (SPEC §5)."""
    from engine.windows import CausalWindowConfig, document_window_counts

    config = CausalWindowConfig(context_length, stride)
    lengths = np.diff(offsets)
    counts = document_window_counts(offsets, config)
    # The first candidate start that cannot fill a window is count * S; a tail exists iff it is inside.
    tail_starts = counts * np.int64(stride)
    has_tail = tail_starts < lengths
    return {
        "windows": int(counts.sum()),
        "incomplete_tails": int(has_tail.sum()),
        "tail_tokens": int((lengths - tail_starts)[has_tail].sum()),
    }


def prepare(
    corpus_path: str | os.PathLike | None = None,
    splits_path: str | os.PathLike | None = None,
    out_dir: str | os.PathLike = "out",
    *,
    tokenizer: str = "bpe",
    merges: int = 200,
    context_length: int = 64,
    stride: int = 1,
    train_fraction: float = 0.9,
    hash_split: dict[str, float] | None = None,
    on_invalid_utf8: str = "error",
    skip_bad_lines: bool = False,
    quiet: bool = False,
) -> PrepareResult:
    """Run the main job and return where everything went plus the report (also in ``report.json``)."""
    from engine.windows import CausalWindowConfig

    CausalWindowConfig(context_length, stride)  # validate before any work
    if corpus_path is None:
        corpus_path, default_splits = default_corpus_paths()
        if splits_path is None and hash_split is None:
            splits_path = default_splits
    if merges < 0:
        raise ConfigurationError(f"--merges must be >= 0, got {merges}")
    out_dir = Path(out_dir)
    store_path = out_dir / "store"
    tokenizer_path = out_dir / "tokenizer.json"
    report_path = out_dir / "report.json"

    with Progress("reading corpus", quiet=quiet) as bar:
        parts = load_partitions(
            corpus_path,
            splits_path,
            hash_split=hash_split,
            train_fraction=train_fraction,
            on_invalid_utf8=on_invalid_utf8,
            skip_bad_lines=skip_bad_lines,
        )
        bar.update(sum(len(parts.documents(p)) for p in Partition))

    train_texts = [d.text for d in parts.documents(Partition.TRAIN)]
    tok = fit_or_load_tokenizer(tokenizer, train_texts, merges=merges, quiet=quiet)

    total_docs = sum(len(parts.documents(p)) for p in Partition)
    with TokenStore.writer(store_path, tok) as writer, Progress(
        "encoding", total=total_docs, quiet=quiet
    ) as bar:
        for partition in Partition:
            docs = parts.documents(partition)
            for lo in range(0, len(docs), ENCODE_CHUNK_DOCUMENTS):
                chunk = docs[lo : lo + ENCODE_CHUNK_DOCUMENTS]
                ids = [d.id for d in chunk]
                values, offsets = tok.encode_documents([d.text for d in chunk], ids)
                writer.write_chunk(partition, ids, values, offsets)
                bar.update(len(chunk), sum(len(d.text.encode("utf-8")) for d in chunk))
            if not docs:
                writer.write_chunk(partition, [], np.empty(0, np.uint32), np.zeros(1, np.int64))
    tok.save(tokenizer_path)

    store = TokenStore.open(store_path, tokenizer=tok)
    partitions: dict[str, Any] = {}
    for partition in Partition:
        docs = parts.documents(partition)
        _, offsets = store.arrays(partition)
        row = {
            "documents": len(docs),
            "characters": sum(len(d.text) for d in docs),
            "tokens": int(offsets[-1]) if len(offsets) else 0,
        }
        row.update(window_counts(offsets, context_length, stride))
        partitions[partition.value] = row

    report = {
        "corpus": str(corpus_path),
        "splits": str(splits_path) if splits_path is not None else None,
        "store": str(store_path),
        "tokenizer": {
            "kind": tok.kind,
            "path": str(tokenizer_path),
            "hash": tok.hash,
            "vocab_size": tok.vocab_size,
            "bos_id": tok.bos_id,
            "eos_id": tok.eos_id,
        },
        "context_length": context_length,
        "stride": stride,
        "partitions": partitions,
    }
    tmp = report_path.with_name(f".{report_path.name}.tmp")
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, report_path)
    return PrepareResult(out_dir, store_path, tokenizer_path, report_path, report)
