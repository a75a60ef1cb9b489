"""Peak RSS of streaming prepare: two corpus sizes, bytes per extra document, one long document; for
``engine bench`` (rows live in bench_memory)."""

from bench_memory import rows  # noqa: F401
