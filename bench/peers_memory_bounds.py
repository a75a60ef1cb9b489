"""The memory bounds of a fit and of what it reads: bytes per type of the type table, one unbroken
piece fitted and encoded, one long line of escaped backslashes; for ``engine bench`` (rows live in
bench_memory, beside the streaming rows of ``peers_memory``, which take much longer)."""

from bench_memory import bound_rows


def rows(quick: bool) -> list[dict]:
    return bound_rows(quick)
