"""Generate a JSONL corpus of a chosen size for the memory benchmark (random words, fixed vocabulary).

A fixed vocabulary of 5,000 lowercase words (seeded) is sampled into a 32 MB pool of text with
spaces and some punctuation; each document is a slice of that pool cut at word edges (1-15 KB),
so any size is written at disk speed while the word-type table stays the same size. Ids are
``doc-000000001``...; the split is a hash split (pass ``--hash-split 0.9,0.05,0.05`` to prepare).

    $ python scripts/make_big_corpus.py --size-mb 250 --out bench/.cache/big-250.jsonl
    wrote bench/.cache/big-250.jsonl: 34,969 documents, 250.0 MB
    $ python scripts/make_big_corpus.py --documents 10000000 --doc-bytes 4,40 --out tiny-10m.jsonl
    $ python scripts/make_big_corpus.py --size-mb 200 --one-document --out one-200.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

VOCABULARY = 5000
POOL_BYTES = 32 << 20
SEED = 1234


def word_pool(seed: int = SEED) -> bytes:
    """``POOL_BYTES`` of text: Zipf-ish draws from a seeded vocabulary, spaces, a few . and ,"""
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    words = [bytes(letters[rng.integers(0, 26, size=int(n))]) for n in rng.integers(2, 11, size=VOCABULARY)]
    ranks = np.minimum(rng.zipf(1.3, size=POOL_BYTES // 4), VOCABULARY) - 1
    marks = rng.random(ranks.shape[0])
    pieces = [words[r] + (b". " if m < 0.05 else b", " if m < 0.1 else b" ") for r, m in zip(ranks.tolist(), marks.tolist())]
    return b"".join(pieces)[:POOL_BYTES]


def make_big_corpus(out: str | Path, size_mb: float | None, *, seed: int = SEED, documents_wanted: int | None = None,
                    doc_bytes: tuple[int, int] = (1_000, 15_000)) -> tuple[Path, int]:
    """Write about ``size_mb`` MB of JSONL (or ``documents_wanted`` documents) to ``out`` (atomically),
    documents of ``doc_bytes`` (low, high) bytes of text; returns (path, documents)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pool = word_pool(seed)
    rng = np.random.default_rng(seed + 1)
    target = int(size_mb * 1e6) if size_mb is not None else float("inf")
    wanted = documents_wanted if documents_wanted is not None else float("inf")
    tmp = out.with_name(f".{out.name}.tmp")
    written = documents = 0
    with open(tmp, "wb") as fh:
        while written < target and documents < wanted:
            starts = rng.integers(0, len(pool) - doc_bytes[1] - 1_000, size=1024)
            lengths = rng.integers(doc_bytes[0], doc_bytes[1], size=1024)
            lines = []
            for start, length in zip(starts.tolist(), lengths.tolist()):
                begin = pool.index(b" ", start) + 1
                end = pool.index(b" ", begin + length)
                documents += 1
                line = b'{"id": "doc-%09d", "text": "%s"}\n' % (documents, pool[begin:end])
                lines.append(line)
                written += len(line)
                if written >= target or documents >= wanted:
                    break
            fh.write(b"".join(lines))
    tmp.replace(out)
    return out, documents


def make_one_document(out: str | Path, size_mb: float, *, seed: int = SEED) -> Path:
    """Write one JSONL line whose text is ``size_mb`` MB on one line (the pool, repeated) to ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pool = word_pool(seed)
    left = int(size_mb * 1e6)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(b'{"id": "one-document", "text": "')
        while left > 0:
            fh.write(pool[:left])
            left -= min(left, len(pool))
        fh.write(b'"}\n')
    tmp.replace(out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, help="approximate size of the JSONL file in MB")
    parser.add_argument("--documents", type=int, help="number of documents (instead of, or as well as, --size-mb)")
    parser.add_argument("--doc-bytes", default="1000,15000", help="LOW,HIGH bytes of text per document")
    parser.add_argument("--one-document", action="store_true", help="one document of --size-mb MB on one line")
    parser.add_argument("--out", required=True, help="JSONL file to write")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    if args.size_mb is None and args.documents is None:
        parser.error("give --size-mb or --documents")
    if args.one_document:
        path = make_one_document(args.out, args.size_mb, seed=args.seed)
        print(f"wrote {path}: 1 document, {path.stat().st_size / 1e6:,.1f} MB on one line")
        return
    low, high = (int(v) for v in args.doc_bytes.split(","))
    path, documents = make_big_corpus(args.out, args.size_mb, seed=args.seed, documents_wanted=args.documents,
                                      doc_bytes=(low, high))
    print(f"wrote {path}: {documents:,} documents, {path.stat().st_size / 1e6:,.1f} MB")


if __name__ == "__main__":
    main()
