"""Pre-tokenization: split text into the pieces byte-level BPE merges within.

A pattern is a name below or any regex string. Three patterns have hand-written scanners, matched
exactly as the ``regex`` module matches them (see ``engine.kernels.pretokenize`` for how the
scanners reproduce the regex semantics); a regex string equal to one of them (or to tiktoken's
spellings, ``TIKTOKEN_SPELLINGS``) is that name and takes its scanner, and a regex that cuts exactly
a named pattern's pieces (``SCANNER_EQUIVALENTS``: Llama 3's, cl100k's) stays itself but runs that
scanner:

- ``"gpt2"``:   ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``
- ``"cl100k"``: ``'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}{1,3}`` followed by
  ``| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+``
- ``"o200k"``: tiktoken's ``o200k_base`` pattern (the GPT-4o family): cased words
  ``[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+``
  and ``...[upper]+[lower]*``, each with an optional ``(?i:'s|'t|'re|'ve|'m|'ll|'d)``, then
  ``\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``

Any other regex is compiled by ``engine.tokenizers.regex`` and run by the matcher of
``engine.kernels.regex_vm``; the pieces are its matches and the text between them (Hugging Face's
``Split`` with the ``Isolated`` behaviour; for patterns that match every character, as
pre-tokenizer patterns do, exactly the matches ``regex.findall`` gives).

``pretokenize(text)`` gives the pieces as strings; ``pretokenize_bytes(data)`` gives the end byte
offsets of the pieces of UTF-8 data (int64), the form the encoder and trainer use.
Cost: one pass over the UTF-8 bytes (hundreds of MB/s on one core).
"""

from __future__ import annotations

import re

import numpy as np

from engine.errors import TokenizerError
from engine.kernels.pretokenize import CL100K, GPT2, O200K, pretokenize_ends
from engine.tokenizers.regex import compile_regex
from engine.tokenizers.unicode_tables import code_point_classes

__all__ = ["PATTERNS", "TIKTOKEN_GPT2", "TIKTOKEN_SPELLINGS", "SCANNER_EQUIVALENTS", "canonical_pattern", "pattern_code",
           "pretokenize", "pretokenize_bytes", "utf8_bytes"]

PATTERNS = {
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "cl100k": (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}"""
               r"""| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"""),
    "o200k": "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
}
_CODES = {"gpt2": GPT2, "cl100k": CL100K, "o200k": O200K}
# tiktoken's spellings (older and current releases) of the same patterns: the same pieces.
TIKTOKEN_GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
TIKTOKEN_SPELLINGS = {
    TIKTOKEN_GPT2: "gpt2",
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""": "gpt2",
    (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$"""
     r"""|\s*[\r\n]|\s+(?!\S)|\s"""): "cl100k",
}
_NAMES = {PATTERNS["gpt2"]: "gpt2", PATTERNS["cl100k"]: "cl100k", PATTERNS["o200k"]: "o200k", **TIKTOKEN_SPELLINGS}
# Names for the regexes of other model families: a name stands for its regex (which the regex compiler
# runs; no scanner of its own), so a tokenizer made with ``pattern="llama3"`` holds the regex itself.
REGEX_NAMES = {
    "llama3": (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+"),
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "tekken": (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
               r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+"),
}
PATTERN_NAMES = (*PATTERNS, *REGEX_NAMES)  # every name a pattern= / --pattern takes
# Regexes that stay themselves (in a tokenizer's file, its hash, its exports) but cut exactly the pieces of
# a named pattern, so the kernels run that pattern's scanner. Llama 3's regex is cl100k's spelt another
# way: its contractions are the same set under (?i); an optional non-letter before letters, or a
# ``+`` before ``[\r\n]*``, never gives anything back that could match (what follows needs a letter
# or is optional), so greedy and possessive cut alike; and ``\s*[\r\n]+`` backtracks to the last newline
# of a whitespace run, where ``[\r\n]+`` can take only that one, the end of ``\s*[\r\n]``.
# (tests/test_pretokenize.py compares the pieces with the regex's own compiled matcher and the ``regex``
# module; tests/test_byte_bpe_regex.py the ids with tiktoken's and Hugging Face's for the regex as written.)
SCANNER_EQUIVALENTS = {REGEX_NAMES["llama3"]: "cl100k"}


_BARE_WORD = re.compile(r"[A-Za-z0-9_.-]+")


def canonical_pattern(pattern: str, source: str = "pattern") -> str:
    """The name of ``pattern`` if it is one (or spells one), else the regex itself once it compiles (a
    name of ``REGEX_NAMES`` gives its regex)
    (``TokenizerError`` naming an unsupported construct; ``source`` says where the pattern came from).
    A bare word (letters, digits, ``_.-``) that is no name is refused as a misspelt name: no
    pre-tokenizer regex is a plain word."""
    if not isinstance(pattern, str):
        raise TokenizerError(f"{source}: expected a pattern name or a regex string, got {type(pattern).__name__}")
    if pattern in _CODES:
        return pattern
    pattern = REGEX_NAMES.get(pattern, pattern)
    name = _NAMES.get(pattern)
    if name is not None:
        return name
    if not pattern:
        raise TokenizerError(f"{source}: an empty pre-tokenizer pattern (expected one of: {', '.join(PATTERN_NAMES)}, "
                             "or a regex)")
    if _BARE_WORD.fullmatch(pattern):
        raise TokenizerError(f"{source} {pattern!r} is unknown (expected one of: {', '.join(PATTERN_NAMES)}, or a regex; "
                             "a bare word is taken for a misspelt name)")
    compile_regex(pattern, source=source)
    return pattern


def pattern_code(pattern: str):
    """What the kernels take for a pattern: ``engine.kernels.pretokenize.GPT2``, ``CL100K`` or
    ``O200K`` for a name (one Numba type each), else the compiled regex's ``RegexProgram``;
    ``TokenizerError`` for a regex that does not compile."""
    canonical = canonical_pattern(pattern)
    code = _CODES.get(SCANNER_EQUIVALENTS.get(canonical, canonical))
    if code is None:
        return compile_regex(pattern).program
    return code


def utf8_bytes(text: str, document_id: str | int | None = None, what: str = "document", *, shift: int = 0) -> bytes:
    """UTF-8 of ``text``; a lone surrogate is a ``TokenizerError`` naming its offset (and document).
    ``shift``: the character offset of ``text`` in its document (a span of a long one)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = f"{what} {document_id!r}, " if document_id is not None else ""
        raise TokenizerError(
            f"{where}character offset {shift + exc.start}: lone surrogate U+{ord(text[exc.start]):04X} cannot be "
            "encoded as UTF-8 (expected valid Unicode text)"
        ) from None


def pretokenize_bytes(data: bytes | np.ndarray, pattern: str = "gpt2") -> np.ndarray:
    """End byte offsets (int64) of the pieces of valid UTF-8 ``data``; piece i is ``[ends[i-1], ends[i])``."""
    code = pattern_code(pattern)
    buf = np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) else data
    if buf.dtype != np.uint8 or buf.ndim != 1:
        raise TokenizerError(f"pretokenize_bytes: expected bytes or a 1-d uint8 array, got {buf.dtype} {buf.shape}")
    out = np.empty(buf.shape[0], dtype=np.int64)
    bounds = np.array([0, buf.shape[0]], dtype=np.int64)
    count = pretokenize_ends(buf, bounds, code_point_classes(), code, out)
    return out[:count].copy()


def pretokenize(text: str, pattern: str = "gpt2") -> list[str]:
    """The pieces of ``text`` under ``pattern`` ("gpt2", "cl100k", "o200k" or a regex), as ``regex.findall`` gives
    them (for a regex: its matches and the text between them)."""
    data = utf8_bytes(text)
    ends = pretokenize_bytes(data, pattern)
    pieces = []
    start = 0
    for end in ends.tolist():
        pieces.append(data[start:end].decode("utf-8"))
        start = end
    return pieces
