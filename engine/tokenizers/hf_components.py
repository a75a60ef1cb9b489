"""The components of a Hugging Face ``tokenizer.json``, read and checked, as Hugging Face runs them.

- Normalizers (``normalizer``): ``NFC``, ``NFD``, ``NFKC``, ``NFKD`` (Python's ``unicodedata``, except
  that a character Hugging Face's older table lacks stays as it is: ``_unicode``), ``Lowercase``
  (each character's own lower case, as Rust gives it: no final-sigma rule), ``Strip`` (Unicode
  White_Space at either end), ``Prepend`` (before a non-empty text), ``Replace`` (every
  non-overlapping occurrence of a string or of a regex, leftmost first), ``Sequence``.
- Pre-tokenizers (``pre_tokenizer``), read into steps that ``hf_pipeline`` runs over UTF-8 bytes
  (``engine.kernels.hf_split``): ``Split`` (a string or a regex; ``Isolated``, ``Removed``,
  ``MergedWithPrevious``, ``MergedWithNext``, ``Contiguous``; ``invert``), ``Digits``
  (``\\p{N}``: runs, or each digit alone with ``individual_digits``), ``Punctuation`` (ASCII
  punctuation and ``\\p{P}``, each mark a match), ``Whitespace`` (``\\w+|[^\\w\\s]+``),
  ``WhitespaceSplit`` (split on White_Space, removed), ``Metaspace`` (spaces become the
  replacement; ``prepend_scheme`` always / first / never; ``split`` before each replacement),
  ``ByteLevel`` (``add_prefix_space``; ``use_regex``: GPT-2's pattern; then every byte is a
  character of GPT-2's byte alphabet for the steps after it), and ``Sequence`` (each step splits the
  pieces of the one before). A regex is compiled by ``engine.tokenizers.regex``.
- Decoders (``decoder``): ``ByteLevel``, ``Metaspace``, ``ByteFallback``, ``Fuse``, ``Strip``,
  ``Replace``, ``Sequence``; without one, tokens are joined by spaces (as Hugging Face does).
- Added tokens: matched in the text before the normalizer (``normalized: false``) or in each
  normalized part after it (``normalized: true``, matched in its normalized spelling), leftmost
  longest, then ``single_word`` (no word character on either side, else not a match), ``lstrip`` /
  ``rstrip`` (the match takes the whitespace beside it).
- ``post_processor`` (``TemplateProcessing``, ``RobertaProcessing``, ``BertProcessing``,
  ``ByteLevel``, ``Sequence``): the special tokens it writes before and after a text.

Any other component, or an option with a value these rules do not cover, is a ``TokenizerError``
naming it.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable

import numpy as np

from engine.errors import TokenizerError
from engine.kernels.hf_split import CONTIGUOUS, ISOLATED, MERGED_NEXT, MERGED_PREVIOUS, REMOVED
from engine.tokenizers.byte_bpe import bytes_to_unicode
from engine.tokenizers.pretokenize import PATTERNS
from engine.tokenizers.unicode_tables import WHITE_SPACE, code_point_classes

__all__ = [
    "NUMERIC", "WHITE", "PUNCT", "WORD", "WORD_RS", "char_flags", "byte_flags", "compile_pattern", "build_normalizer",
    "space_normalizer", "parse_pre_tokenizer", "build_decoder", "AddedToken", "AddedVocabulary", "post_processor_wrappers",
]

NUMERIC, WHITE, PUNCT, WORD, WORD_RS = 1, 2, 4, 8, 16
BEHAVIORS = {"Isolated": ISOLATED, "Removed": REMOVED, "MergedWithPrevious": MERGED_PREVIOUS,
             "MergedWithNext": MERGED_NEXT, "Contiguous": CONTIGUOUS}
# Split regexes the pre-tokenizer scanners cut exactly (``Isolated``, not inverted, before any
# ByteLevel), with the steps that replace them: tiktoken's spellings, GPT-2's grouped contraction,
# Llama 3's spelling of cl100k (``(?i:'s|...)``, plain ``?`` and ``+`` where cl100k is possessive,
# ``\s*[\r\n]+``: each matches what cl100k's does), and Qwen2's, which is Llama 3's with ``\p{N}``
# for ``\p{N}{1,3}``: digits occur in no other alternative, so it is cl100k's pieces with every
# number cut into single digits.
_LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
           r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
KNOWN_PATTERNS = {
    **{regex: [("scan", name)] for name, regex in PATTERNS.items()},
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""": [("scan", "gpt2")],
    _LLAMA3: [("scan", "cl100k")],
    _LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}"): [("scan", "cl100k"), ("classes", 1, -1, 0)],
}
_WHITESPACE = "".join(map(chr, WHITE_SPACE))


@functools.lru_cache(maxsize=1)
def char_flags() -> np.ndarray:
    """uint8 flags per code point, as Hugging Face's components test characters (each set asked of
    ``tokenizers`` itself, ``engine.tokenizers.hf_unicode``): ``NUMERIC`` (Rust's ``is_numeric``, the
    ``Digits`` pre-tokenizer's), ``WHITE`` (White_Space: Rust's ``is_whitespace``), ``PUNCT`` (the
    ``Punctuation`` pre-tokenizer's: ASCII punctuation and an older Unicode's ``\\p{P}``), ``WORD``
    and ``WORD_RS`` (the Rust ``regex`` crate's ``\\w``, which ``Whitespace`` and ``single_word``
    test)."""
    from engine.tokenizers.hf_unicode import DIGIT_RANGES, PUNCTUATION_RANGES, WORD_RANGES

    classes = code_point_classes()
    flags = np.zeros(classes.shape[0], dtype=np.uint8)
    flags[(classes & 4) != 0] |= WHITE
    for ranges, flag in ((DIGIT_RANGES, NUMERIC), (PUNCTUATION_RANGES, PUNCT), (WORD_RANGES, WORD | WORD_RS)):
        for first, last in ranges:
            flags[first:last + 1] |= flag
    flags.flags.writeable = False
    return flags


@functools.lru_cache(maxsize=1)
def byte_flags() -> np.ndarray:
    """``char_flags`` of the character that stands for each byte after ``ByteLevel``."""
    flags = char_flags()
    table = bytes_to_unicode()
    out = np.array([flags[ord(table[b])] for b in range(256)], dtype=np.uint8)
    out.flags.writeable = False
    return out


def _name(spec) -> str:
    return json.dumps(spec, ensure_ascii=False)[:160]


def _field(spec: dict, key: str, kinds, what: str, source: str):
    value = spec.get(key)
    if not isinstance(value, kinds) or isinstance(value, bool):
        raise TokenizerError(f"{source}: {what} {spec.get('type')} needs {key!r} ({_name(spec)})")
    return value


def compile_pattern(pattern, what: str, source: str):
    """``("string", bytes)`` or ``("regex", compiled)`` of a ``{"String": s}`` / ``{"Regex": r}`` pattern."""
    if isinstance(pattern, dict) and len(pattern) == 1:
        (kind, value), = pattern.items()
        if kind == "String" and isinstance(value, str) and value:
            return "string", value.encode("utf-8")
        if kind == "Regex" and isinstance(value, str):
            from engine.tokenizers.regex import compile_regex  # the regex engine is its own module
            try:
                return "regex", compile_regex(value, dialect="oniguruma")
            except TokenizerError as exc:
                raise TokenizerError(f"{source}: {what} regex {value!r}: {exc}") from None
    raise TokenizerError(f"{source}: {what} pattern {_name(pattern)} is not supported "
                         "(expected {\"String\": non-empty text} or {\"Regex\": pattern})")


def find_all(pattern, text: str) -> list[tuple[int, int]]:
    """Character spans of the non-overlapping matches of a ``compile_pattern`` pattern in ``text``."""
    kind, value = pattern
    if kind == "string":
        literal = value.decode("utf-8")
        spans, at = [], text.find(literal)
        while at >= 0:
            spans.append((at, at + len(literal)))
            at = text.find(literal, at + len(literal))
        return spans
    data = text.encode("utf-8")
    spans = value.find_spans(data)
    if not len(spans):
        return []
    starts = np.zeros(len(data) + 1, dtype=np.int64)  # character offset of each byte offset
    starts[1:] = np.cumsum((np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80)
    return [(int(starts[s]), int(starts[e])) for s, e in np.asarray(spans).tolist()]


# -- normalizers --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _lower_table() -> dict[int, str]:
    from engine.tokenizers.hf_unicode import LOWERCASE

    return dict(LOWERCASE)


def _lowercase(text: str) -> str:
    """Each character's own lower case as Hugging Face's ``Lowercase`` gives it (Rust's
    ``to_lowercase``, from ``hf_unicode.LOWERCASE``, whatever Python's Unicode): no final-sigma rule."""
    if text.isascii():
        return text.lower()
    return text.translate(_lower_table())


def _replace(pattern, content: str) -> Callable[[str], str]:
    if pattern[0] == "string":  # str.replace: every non-overlapping occurrence, leftmost first
        literal = pattern[1].decode("utf-8")
        return lambda text: text.replace(literal, content)

    def run(text: str) -> str:
        spans = find_all(pattern, text)
        if not spans:
            return text
        parts, at = [], 0
        for s, e in spans:
            parts.append(text[at:s])
            parts.append(content)
            at = e
        parts.append(text[at:])
        return "".join(parts)
    return run


@functools.lru_cache(maxsize=1)
def _opaque() -> np.ndarray:
    """bool per code point: those Hugging Face's normalizers leave as they are although Python's
    ``unicodedata`` may normalize them: the code points with Unicode 16.0 normalization data its
    table lacks (``hf_unicode.NORMALIZATION_OPAQUE_RANGES``) and, on a Python whose Unicode is
    newer than 16.0, every code point 16.0 leaves unassigned."""
    from engine.tokenizers.hf_unicode import NORMALIZATION_OPAQUE_RANGES

    table = np.zeros(0x110000, dtype=np.bool_)
    for first, last in NORMALIZATION_OPAQUE_RANGES:
        table[first:last + 1] = True
    if tuple(int(p) for p in unicodedata.unidata_version.split(".")) > (16, 0, 0):
        from engine.tokenizers.regex_syntax import code_point_categories
        from engine.tokenizers.unicode_properties import CATEGORIES

        table |= code_point_categories() == CATEGORIES.index("Cn")
    table.flags.writeable = False
    return table


def _unicode(form: str) -> Callable[[str], str]:
    """``unicodedata.normalize(form, ·)`` as Hugging Face's normalizer gives it: its table is older
    than Python's, so a character it does not know (``_opaque``) stays as it is, and (having no
    decomposition, combining class or composition there) nothing normalizes across it: the text
    between such characters is normalized part by part."""
    def normalize(text: str) -> str:
        return text if unicodedata.is_normalized(form, text) else unicodedata.normalize(form, text)

    def run(text: str) -> str:
        if text.isascii():
            return text
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        at_opaque = np.flatnonzero(_opaque()[cps])
        if not at_opaque.shape[0]:
            return normalize(text)
        parts, at = [], 0
        for i in at_opaque.tolist():
            parts.append(normalize(text[at:i]))
            parts.append(text[i])
            at = i + 1
        parts.append(normalize(text[at:]))
        return "".join(parts)
    return run


def space_normalizer(spec) -> tuple[int, int] | None:
    """``(prefix, replacement)`` code points when the ``normalizer`` entry is ``Prepend(p)`` then
    ``Replace(" ", r)`` of one character each (Llama 2's): what it does to a text is
    ``spaces_replaced`` on its code points, with ``prefix`` the replaced ``p``. None otherwise."""
    if not isinstance(spec, dict) or spec.get("type") != "Sequence":
        return None
    steps = spec.get("normalizers")
    if not isinstance(steps, list) or len(steps) != 2 or not all(isinstance(x, dict) for x in steps):
        return None
    prepend, replace = steps
    p, r = prepend.get("prepend"), replace.get("content")
    if (prepend.get("type") != "Prepend" or replace.get("type") != "Replace" or replace.get("pattern") != {"String": " "}
            or not isinstance(p, str) or not isinstance(r, str) or len(p) != 1 or len(r) != 1):
        return None
    return ord(r if p == " " else p), ord(r)


def build_normalizer(spec, source: str) -> tuple[Callable[[str], str] | None, tuple[str, ...]]:
    """``(function or None, the normalizer types in order)`` of a ``normalizer`` entry."""
    if spec is None:
        return None, ()
    steps: list[Callable[[str], str]] = []
    kinds: list[str] = []

    def add(item):
        kind = item.get("type") if isinstance(item, dict) else None
        kinds.append(str(kind))
        if kind == "Sequence":
            for sub in _field(item, "normalizers", list, "normalizer", source):
                add(sub)
        elif kind in ("NFC", "NFD", "NFKC", "NFKD"):
            steps.append(_unicode(kind))
        elif kind == "Lowercase":
            steps.append(_lowercase)
        elif kind == "Strip":
            left, right = bool(item.get("strip_left", True)), bool(item.get("strip_right", True))
            steps.append(lambda t: t.lstrip(_WHITESPACE) if left and not right else
                         t.rstrip(_WHITESPACE) if right and not left else t.strip(_WHITESPACE) if left else t)
        elif kind == "Prepend":
            prefix = _field(item, "prepend", str, "normalizer", source)
            steps.append(lambda t: prefix + t if t else t)
        elif kind == "Replace":
            steps.append(_replace(compile_pattern(item.get("pattern"), "Replace normalizer", source),
                                  _field(item, "content", str, "normalizer", source)))
        else:
            raise TokenizerError(f"{source}: normalizer {kind!r} is not supported ({_name(item)}); expected NFC, NFD, "
                                 "NFKC, NFKD, Lowercase, Strip, Prepend, Replace or Sequence")

    add(spec)

    def normalize(text: str) -> str:
        for step in steps:
            text = step(text)
        return text
    return normalize, tuple(kinds)


# -- pre-tokenizers -----------------------------------------------------------------------------

def _behavior(item: dict, source: str, default: str | None = None) -> int:
    name = item.get("behavior", default)
    if name not in BEHAVIORS:
        raise TokenizerError(f"{source}: pre-tokenizer {item.get('type')} behavior {name!r} is not supported "
                             f"(expected one of: {', '.join(BEHAVIORS)})")
    return BEHAVIORS[name]


def _prepend_scheme(item: dict, source: str) -> str:
    scheme = item.get("prepend_scheme")
    if scheme is None:  # files written before prepend_scheme existed
        scheme = "always" if item.get("add_prefix_space", True) else "never"
    if scheme not in ("always", "first", "never"):
        raise TokenizerError(f"{source}: Metaspace prepend_scheme {scheme!r} is not supported "
                             "(expected always, first or never)")
    return scheme


def _replacement(item: dict, source: str) -> str:
    replacement = item.get("replacement", "\u2581")
    if not isinstance(replacement, str) or len(replacement) != 1:
        raise TokenizerError(f"{source}: Metaspace replacement {replacement!r}: expected one character")
    return replacement


def parse_pre_tokenizer(spec, source: str) -> list[tuple]:
    """The steps of a ``pre_tokenizer`` entry, in order (flattened ``Sequence``):

    ``("split", pattern, behavior, invert)``, ``("scan", name)`` (a pattern of
    ``engine.tokenizers.pretokenize``, isolated), ``("classes", mask, target, behavior)``, ``("words",)``,
    ``("bytelevel", add_prefix_space)``, ``("metaspace", replacement, scheme, split)``."""
    steps: list[tuple] = []
    if spec is None:
        return steps

    def add(item):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "Sequence":
            for sub in _field(item, "pretokenizers", list, "pre-tokenizer", source):
                add(sub)
        elif kind == "Split":
            invert = item.get("invert", False)
            if not isinstance(invert, bool):
                raise TokenizerError(f"{source}: Split invert {invert!r}: expected true or false")
            behavior = _behavior(item, source)
            pattern = item.get("pattern")
            regex = pattern.get("Regex") if isinstance(pattern, dict) else None
            mapped = any(step[0] == "bytelevel" for step in steps)
            if regex in KNOWN_PATTERNS and behavior == ISOLATED and not invert and not mapped:
                steps.extend(KNOWN_PATTERNS[regex])
            else:
                steps.append(("split", compile_pattern(pattern, "Split", source), behavior, invert))
        elif kind == "Digits":
            steps.append(("classes", NUMERIC, -1, ISOLATED if item.get("individual_digits") else CONTIGUOUS))
        elif kind == "Punctuation":
            steps.append(("classes", PUNCT, -1, _behavior(item, source, "Isolated")))
        elif kind == "WhitespaceSplit":
            steps.append(("classes", WHITE, -1, REMOVED))
        elif kind == "Whitespace":
            steps.append(("words",))
        elif kind == "ByteLevel":
            if any(step[0] in ("bytelevel", "metaspace") for step in steps):
                raise TokenizerError(f"{source}: ByteLevel after {steps[-1][0]} is not supported (expected one "
                                     "ByteLevel, and no Metaspace before it)")
            steps.append(("bytelevel", bool(item.get("add_prefix_space", True))))
            if item.get("use_regex", True):
                steps.append(("scan", "gpt2"))
        elif kind == "Metaspace":
            if any(step[0] == "bytelevel" for step in steps):
                raise TokenizerError(f"{source}: Metaspace after ByteLevel is not supported")
            steps.append(("metaspace", _replacement(item, source), _prepend_scheme(item, source),
                          bool(item.get("split", True))))
        else:
            raise TokenizerError(
                f"{source}: unsupported pre_tokenizer {kind!r} ({_name(item)}); expected Split, Digits, "
                "Punctuation, Whitespace, WhitespaceSplit, Metaspace, ByteLevel or Sequence")

    add(spec)
    return steps


# -- decoders -----------------------------------------------------------------------------------

def _byte_level_decode(tokens: list[str]) -> list[str]:
    table = {c: b for b, c in bytes_to_unicode().items()}
    data = bytearray()
    for token in tokens:
        try:
            data.extend(table[c] for c in token)
        except KeyError:
            data.extend(token.encode("utf-8"))
    return [data.decode("utf-8", "replace")]


def _byte_fallback_decode(tokens: list[str]) -> list[str]:
    out: list[str] = []
    pending = bytearray()

    def flush():
        if pending:
            try:
                out.append(pending.decode("utf-8"))
            except UnicodeDecodeError:
                out.extend("\ufffd" for _ in pending)
            pending.clear()
    for token in tokens:
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            try:
                pending.append(int(token[3:5], 16))
                continue
            except ValueError:
                pass
        flush()
        out.append(token)
    flush()
    return out


def _strip_decode(content: str, start: int, stop: int) -> Callable[[list[str]], list[str]]:
    def run(tokens: list[str]) -> list[str]:
        out = []
        for token in tokens:
            lo = 0
            while lo < min(start, len(token)) and token[lo] == content:
                lo += 1
            hi = len(token)
            for _ in range(stop):
                if hi > lo and token[hi - 1] == content:
                    hi -= 1
                else:
                    break
            out.append(token[lo:hi])
        return out
    return run


def _metaspace_decode(replacement: str, scheme: str) -> Callable[[list[str]], list[str]]:
    def run(tokens: list[str]) -> list[str]:
        out = []
        for i, token in enumerate(tokens):
            if i == 0 and scheme != "never":
                out.append(token.replace(replacement, ""))
            else:
                out.append(token.replace(replacement, " "))
        return out
    return run


def build_decoder(spec, source: str) -> Callable[[list[str]], str]:
    """The text of a list of token strings, as the ``decoder`` entry decodes it."""
    chain: list[Callable[[list[str]], list[str]]] = []

    def add(item):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "Sequence":
            for sub in _field(item, "decoders", list, "decoder", source):
                add(sub)
        elif kind == "ByteLevel":
            chain.append(_byte_level_decode)
        elif kind == "ByteFallback":
            chain.append(_byte_fallback_decode)
        elif kind == "Fuse":
            chain.append(lambda tokens: ["".join(tokens)])
        elif kind == "Strip":
            content = _field(item, "content", str, "decoder", source)
            start, stop = item.get("start", 0), item.get("stop", 0)
            if len(content) != 1 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                            for v in (start, stop)):
                raise TokenizerError(f"{source}: Strip decoder needs one content character and counts start, stop "
                                     f">= 0 ({_name(item)})")
            chain.append(_strip_decode(content, start, stop))
        elif kind == "Replace":
            replace = _replace(compile_pattern(item.get("pattern"), "Replace decoder", source),
                               _field(item, "content", str, "decoder", source))
            chain.append(lambda tokens: [replace(t) for t in tokens])
        elif kind == "Metaspace":
            chain.append(_metaspace_decode(_replacement(item, source), _prepend_scheme(item, source)))
        else:
            raise TokenizerError(f"{source}: decoder {kind!r} is not supported ({_name(item)}); expected ByteLevel, "
                                 "Metaspace, ByteFallback, Fuse, Strip, Replace or Sequence")

    if spec is None:
        return lambda tokens: " ".join(tokens)
    add(spec)

    def decode(tokens: list[str]) -> str:
        for step in chain:
            tokens = step(tokens)
        return "".join(tokens)
    return decode


# -- added tokens -------------------------------------------------------------------------------

@dataclass(frozen=True)
class AddedToken:
    id: int
    content: str
    special: bool
    normalized: bool
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False


def _is_word(c: str) -> bool:
    return bool(char_flags()[ord(c)] & WORD_RS)


class AddedVocabulary:
    """Finds added tokens in text as Hugging Face does (see the module docstring)."""

    def __init__(self, tokens: list[AddedToken], normalize: Callable[[str], str] | None):
        self.tokens = tokens
        raw = [(t.content, t) for t in tokens if not t.normalized]
        done = [((normalize(t.content) if normalize else t.content), t) for t in tokens if t.normalized]
        self._raw = self._matcher(raw)
        self._normalized = self._matcher(done)

    @staticmethod
    def _matcher(pairs):
        by_content: dict[str, AddedToken] = {}
        for content, token in pairs:
            if content:
                by_content.setdefault(content, token)
        if not by_content:
            return None
        alternatives = sorted(by_content, key=len, reverse=True)  # at one start, the longest first
        return re.compile("|".join(map(re.escape, alternatives))), by_content

    @property
    def in_normalized(self) -> bool:
        """Whether some token is matched in normalized text (a ``normalized`` added token)."""
        return self._normalized is not None

    def split(self, text: str, normalized: bool, skip_special: bool) -> list[tuple[int | None, int, int]]:
        """``[(token id or None for text, start, stop)]`` covering ``text`` (character offsets)."""
        matcher = self._normalized if normalized else self._raw
        if matcher is None or not text:
            return [(None, 0, len(text))]
        pattern, by_content = matcher
        out: list[tuple[int | None, int, int]] = []
        at = 0
        for match in pattern.finditer(text):
            token = by_content[match.group()]
            start, stop = match.span()
            if skip_special and token.special:
                continue
            if token.single_word and ((start > 0 and _is_word(text[start - 1]))
                                      or (stop < len(text) and _is_word(text[stop]))):
                continue
            if token.lstrip:
                s = start
                while s > 0 and text[s - 1] in _WHITESPACE:
                    s -= 1
                start = max(s, at)
            if token.rstrip:
                while stop < len(text) and text[stop] in _WHITESPACE:
                    stop += 1
            if at < start:
                out.append((None, at, start))
            out.append((token.id, start, stop))
            at = stop
        if at != len(text):
            out.append((None, at, len(text)))
        return out


# -- post-processor -----------------------------------------------------------------------------

def post_processor_wrappers(spec, source: str) -> tuple[str | None, str | None]:
    """The special tokens the ``post_processor`` writes before and after a single text (None: none)."""
    if spec is None:
        return None, None
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "ByteLevel":
        return None, None
    if kind in ("RobertaProcessing", "BertProcessing"):
        cls, sep = spec.get("cls"), spec.get("sep")
        if not (isinstance(cls, list) and isinstance(sep, list) and cls and sep):
            raise TokenizerError(f"{source}: {kind} needs cls and sep ({_name(spec)})")
        return str(cls[0]), str(sep[0])
    if kind == "TemplateProcessing":
        single = spec.get("single")
        if not isinstance(single, list):
            raise TokenizerError(f"{source}: TemplateProcessing needs a 'single' template ({_name(spec)})")
        before: list[str] = []
        after: list[str] = []
        seen_sequence = False
        for piece in single:
            if isinstance(piece, dict) and "Sequence" in piece:
                seen_sequence = True
            elif isinstance(piece, dict) and isinstance(piece.get("SpecialToken"), dict):
                (after if seen_sequence else before).append(str(piece["SpecialToken"].get("id")))
            else:
                raise TokenizerError(f"{source}: TemplateProcessing piece {_name(piece)} is not supported")
        if len(before) > 1 or len(after) > 1:
            raise TokenizerError(f"{source}: TemplateProcessing writes {before} before and {after} after a text; "
                                 "expected at most one special token on each side")
        return (before[0] if before else None), (after[0] if after else None)
    if kind == "Sequence":
        bos = eos = None
        for sub in spec.get("processors") or []:
            b, e = post_processor_wrappers(sub, source)
            bos, eos = b or bos, e or eos
        return bos, eos
    raise TokenizerError(f"{source}: post_processor {kind!r} is not supported ({_name(spec)}); expected "
                         "TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel or Sequence")
