"""Reading a compressed corpus: the stdlib corpus as .jsonl.zst beside plain .jsonl, speed and peak
RSS; for ``engine bench`` (rows live in bench_corpus_read)."""

from bench_corpus_read import rows  # noqa: F401
