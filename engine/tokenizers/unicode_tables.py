"""Character classes for the pre-tokenizer kernels: one byte of flags per Unicode code point.

The table covers all 0x110000 code points (1.1 MB, uint8) and is built once, lazily, never at
``import engine``:

- ``LETTER``: ``\\p{L}``, and ``NUMBER``: ``\\p{N}``, from the ranges in ``unicode_ranges.py``,
  generated from the ``regex`` module by ``scripts/make_unicode_ranges.py``. Python's own
  ``unicodedata`` is older (Unicode 14.0 on Python 3.11) than ``regex``'s tables; taking the ranges
  from ``regex`` makes the pre-tokenizers split exactly as ``regex.findall`` does, on every Python.
- ``SPACE``: the Unicode White_Space property, which is what the ``regex`` module's ``\\s``
  matches (25 code points; unlike ``str.isspace`` it excludes U+001C..U+001F)
- ``CR_LF``: ``\\r`` and ``\\n``;  ``ASCII_SPACE``: U+0020 (the `` ?`` of the patterns)
- ``UPPER``: ``[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]`` and ``LOWER``: ``[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]``,
  the case classes of the o200k pattern (generated from ``regex`` like the letters)
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "LETTER",
    "NUMBER",
    "SPACE",
    "CR_LF",
    "ASCII_SPACE",
    "UPPER",
    "LOWER",
    "WHITE_SPACE",
    "code_point_classes",
    "divergent_code_points",
]

LETTER = np.uint8(1)
NUMBER = np.uint8(2)
SPACE = np.uint8(4)
CR_LF = np.uint8(8)
ASCII_SPACE = np.uint8(16)
UPPER = np.uint8(32)
LOWER = np.uint8(64)

# The Unicode White_Space property (PropList.txt); stable since Unicode 6.3.
WHITE_SPACE = (
    [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680]
    + list(range(0x2000, 0x200B))
    + [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)

MAX_CODE_POINT = 0x110000


@functools.lru_cache(maxsize=1)
def code_point_classes() -> np.ndarray:
    """uint8 flags for every code point (read-only; built on first use, then cached)."""
    from engine.tokenizers.unicode_ranges import LETTER_RANGES, LOWER_RANGES, NUMBER_RANGES, UPPER_RANGES

    classes = np.zeros(MAX_CODE_POINT, dtype=np.uint8)
    for ranges, flag in ((LETTER_RANGES, LETTER), (NUMBER_RANGES, NUMBER), (UPPER_RANGES, UPPER),
                         (LOWER_RANGES, LOWER)):
        for first, last in ranges:
            classes[first : last + 1] |= flag
    classes[np.asarray(WHITE_SPACE, dtype=np.int64)] |= SPACE
    classes[[0x0D, 0x0A]] |= CR_LF
    classes[0x20] |= ASCII_SPACE
    classes.flags.writeable = False
    return classes


def divergent_code_points() -> list[int]:
    """Code points whose letter/number/space/upper/lower class differs between this table and ``regex``.

    Needs the ``regex`` package (the ``test`` extra). Empty when both use the same Unicode.
    """
    import regex

    classes = code_point_classes()
    letter = regex.compile(r"\p{L}")
    number = regex.compile(r"\p{N}")
    space = regex.compile(r"\s")
    upper = regex.compile(r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]")
    lower = regex.compile(r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]")
    out = []
    for cp in range(MAX_CODE_POINT):
        ch = chr(cp)
        flags = int(classes[cp])
        if (
            bool(flags & LETTER) != bool(letter.match(ch))
            or bool(flags & NUMBER) != bool(number.match(ch))
            or bool(flags & SPACE) != bool(space.match(ch))
            or bool(flags & UPPER) != bool(upper.match(ch))
            or bool(flags & LOWER) != bool(lower.match(ch))
        ):
            out.append(cp)
    return out
