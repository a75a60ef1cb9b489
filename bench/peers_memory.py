"""Peak RSS of streaming prepare at two corpus sizes, for ``engine bench`` (rows live in bench_memory)."""

from bench_memory import rows  # noqa: F401
