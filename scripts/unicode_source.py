"""The Unicode the pre-tokenizer tables follow, for scripts/make_unicode_ranges.py and
scripts/make_unicode_properties.py.

The references engine's ids must equal classify code points by Unicode 16.0: tiktoken (Rust's
``regex`` crate) and Hugging Face ``tokenizers`` (Oniguruma). The ``regex`` module is newer
(Unicode 18.0 in 2026.11.19: 17,810 more code points assigned, and U+0295 moved from Ll to Lo),
so a table taken from it alone splits text differently from both references on those code
points. The tables therefore take the general category of every code point from
``unicodedata2`` 16.0.0, and the properties ``regex`` alone provides (scripts, ``\\w``, what
``(?i)`` matches) from ``regex`` for the code points Unicode 16.0 assigns; a code point Unicode
16.0 leaves unassigned is Cn, in no script, no word character and folds to nothing.
``tests/test_unicode_version.py`` checks the tables against tiktoken and Oniguruma themselves.

    pip install unicodedata2==16.0.0   # only to regenerate the tables
"""

UNICODE_VERSION = "16.0.0"


def categories() -> list[str]:
    """The general category of every code point 0..0x10FFFF in Unicode ``UNICODE_VERSION``."""
    try:
        import unicodedata2
    except ImportError:
        raise SystemExit(f"needs unicodedata2=={UNICODE_VERSION}: pip install unicodedata2=={UNICODE_VERSION}") from None
    if unicodedata2.unidata_version != UNICODE_VERSION:
        raise SystemExit(f"unicodedata2 has Unicode {unicodedata2.unidata_version}, expected {UNICODE_VERSION}: "
                         f"pip install unicodedata2=={UNICODE_VERSION}")
    return [unicodedata2.category(chr(cp)) for cp in range(0x110000)]


def runs(flags: list[bool]) -> list[tuple[int, int]]:
    """Inclusive ranges of the code points whose flag is set."""
    out, start = [], None
    for cp, flag in enumerate(flags + [False]):
        if flag and start is None:
            start = cp
        elif not flag and start is not None:
            out.append((start, cp - 1))
            start = None
    return out
