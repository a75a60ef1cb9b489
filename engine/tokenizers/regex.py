"""Pre-tokenizer regexes of any shape, compiled to a program the Numba matcher runs (``engine.kernels.regex_vm``).

``compile_regex(pattern)`` parses the pattern (the syntax tokenizer files use: Oniguruma's, which for
these constructs is also the ``regex`` module's) and compiles it; a construct it does not support
is a ``TokenizerError`` naming it and its offset, never a silent difference. Supported:

- literals, ``.`` (any character but ``\\n``), alternation ``|``, groups ``(...)``, ``(?:...)``,
  named groups ``(?<name>...)`` / ``(?P<name>...)`` (captures are not reported), case-insensitive
  ``(?i:...)``, ``(?-i:...)`` and ``(?i)`` (to the end of the enclosing group);
- classes ``[...]``, ``[^...]`` with ranges, escapes and properties inside;
- escapes ``\\s \\S \\d \\D \\w \\W \\r \\n \\t \\f \\v \\a \\e \\xHH \\x{H...} \\uHHHH`` and escaped
  punctuation; properties ``\\p{..}`` / ``\\P{..}`` / ``\\p{^..}``: general categories (``L Lu Ll Lt
  Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Co Cn``,
  long names such as ``Letter`` too, ``L&``/``LC``), ``Any``, and the scripts of
  ``unicode_properties.SCRIPTS`` (``Han``, ``Hiragana``, ``Katakana``, ``Hangul``, ``Latin``...:
  the ``Script`` property); an unknown name is refused;
- quantifiers ``? * + {m} {m,} {m,n} {,n}``, greedy, lazy (``*?``) and possessive (``?+ *+ ++``);
  ``{m,n}+`` is refused (possessive in ``regex``, a repeated repetition in Oniguruma);
- atomic groups ``(?>...)``, lookahead ``(?=...)`` ``(?!...)``;
- anchors ``\\A``, ``\\z``, ``\\b``, ``\\B``, ``^`` and ``$``: with ``dialect="oniguruma"`` (a
  tokenizer.json's regex) ``^`` / ``$`` are a line's start / end, as Oniguruma means them; in the
  default dialect (a tiktoken file's or a trained tokenizer's regex) the text's start / end, as
  tiktoken (Rust's ``regex`` crate) means them (``$`` is not before a final newline);
  ``\\Z`` and ``\\G`` are refused.

Refused by name: lookbehind, backreferences, conditionals, inline flags other than ``i``, POSIX
brackets, nested classes and ``&&``, ``\\h \\R \\X \\K`` and other escapes, a group that can match the
empty string under ``* + {m,}``, and under ``(?i)`` any literal or class that full case folding
would let Oniguruma match across several characters (``ß`` and ``ss``, ``ﬁ`` and ``fi``...).

Classes come from ``unicode_ranges`` / ``unicode_properties``: Unicode 16.0, the version tiktoken and
Oniguruma classify by (a code point assigned later is ``\\p{Cn}``, as there; checked against both in
``tests/test_unicode_version.py``). ``\\s`` is White_Space, ``\\d`` is ``\\p{Nd}``, ``\\w`` is the word
class of tiktoken and the ``regex`` module (Alphabetic, marks, ``\\p{Nd}``, ``\\p{Pc}``, ZWJ/ZWNJ).
Oniguruma's ``\\w`` differs from it on eight code points: U+200C/U+200D are not words there, and
the Latin-1 numbers ``² ³ ¹ ¼ ½ ¾`` (U+00B2, U+00B3, U+00B9, U+00BC..U+00BE) are, outside a bracket
class (``[\\w]`` leaves them); a regex compiled with ``dialect="oniguruma"`` (every regex of a
tokenizer.json) takes Oniguruma's, in and out of brackets. ``(?i)`` uses simple case folding
(``unicode_properties.FOLD_CLASSES``: for each character, what ``(?i)`` makes it match in tiktoken and
Oniguruma: the ``regex`` module's folds less its Turkic pairs I/ı and i/İ).

Matching (``Regex.find_spans``) is leftmost-first backtracking, as both engines do; see
``engine.kernels.regex_vm`` for the program, the empty-match rules and the cost.
"""

from __future__ import annotations

import functools

import numpy as np

from engine.errors import TokenizerError
from engine.kernels.regex_vm import (ASSERT, ATOMIC, ATOMIC_END, A_NWORDB, A_WORDB, CHAR, CLASS, JMP, LOOK, LOOK_END,
                                     MATCH, RUN, RUN_GREEDY, RUN_LAZY, RUN_POSSESSIVE, SPLIT, SPLIT_GUARD, SPLIT_GUARD2,
                                     RegexProgram,
                                     find_matches)
from engine.tokenizers.regex_syntax import DIALECTS, MAX_CP, Parser, class_sets, escape_class, first_set, nullable

__all__ = ["Regex", "compile_regex", "MAX_CLASSES"]

MAX_CLASSES = 64  # distinct classes of one pattern (one bit each in the class table)
MAX_PROGRAM = 20000  # instructions (bounded repetitions of groups are copied)


# -- compiler -------------------------------------------------------------------------------------


def _optional_then(node):
    """``(X, Y)`` masks when ``node`` starts with an optional character of class X then a mandatory one
    of class Y (``X?Y...``, ``X?Y+...``), else ``(None, None)``: a two-character branch guard."""
    if node[0] != "cat" or len(node[1]) < 2:
        return None, None
    head, second = node[1][0], node[1][1]
    if not (head[0] == "rep" and head[1][0] == "set" and head[2] == 0 and head[3] == 1):
        return None, None
    if second[0] == "set":
        return head[1][1], second[1]
    if second[0] == "rep" and second[1][0] == "set" and second[2] >= 1:
        return head[1][1], second[1][1]
    return None, None


class _Compiler:
    def __init__(self, parser: Parser):
        self.code: list[list[int]] = []
        self.masks: list[np.ndarray] = []
        self.keys: dict[bytes, int] = {}
        self.memo = 0
        self.parser = parser

    def class_bit(self, mask: np.ndarray, optional: bool = False) -> int:
        key = np.packbits(mask).tobytes()
        bit = self.keys.get(key)
        if bit is None:
            if len(self.masks) >= MAX_CLASSES:
                if optional:
                    return -1
                raise self.parser.error(f"more than {MAX_CLASSES} distinct character classes", 0)
            bit = len(self.masks)
            self.masks.append(mask)
            self.keys[key] = bit
        return bit

    def emit(self, op: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0, e: int = 0) -> int:
        if len(self.code) >= MAX_PROGRAM:
            raise self.parser.error(f"a program of more than {MAX_PROGRAM} instructions (large bounded repetitions "
                                    "of groups)", 0)
        self.code.append([op, a, b, c, d, e, -1])
        return len(self.code) - 1

    def compile(self, node, top: bool) -> None:
        kind = node[0]
        if kind == "set":
            mask = node[1]
            if mask.sum() == 1:
                self.emit(CHAR, int(np.flatnonzero(mask)[0]))
            else:
                self.emit(CLASS, self.class_bit(mask))
        elif kind == "empty":
            pass
        elif kind == "assert":
            word = self.class_bit(escape_class("w", self.parser.dialect)) if node[1] in (A_WORDB, A_NWORDB) else 0
            self.emit(ASSERT, node[1], word)
        elif kind == "cat":
            for n in node[1]:
                self.compile(n, top)
        elif kind == "alt":
            jumps = []
            branches = node[1]
            for k, n in enumerate(branches):
                if k < len(branches) - 1:
                    first = None if nullable(n) else first_set(n)
                    guard = -1 if first is None else self.class_bit(first, optional=True)
                    optional, then = _optional_then(n)
                    if guard >= 0 and optional is not None:
                        bits = (self.class_bit(then, optional=True), self.class_bit(optional, optional=True))
                        split = self.emit(SPLIT_GUARD2, 0, 0, *bits) if min(bits) >= 0 else \
                            self.emit(SPLIT_GUARD, 0, 0, guard)
                    else:
                        split = self.emit(SPLIT_GUARD if guard >= 0 else SPLIT, 0, 0, guard)
                    self.code[split][1] = len(self.code)
                    self.compile(n, top)
                    jumps.append(self.emit(JMP))
                    self.code[split][2] = len(self.code)
                else:
                    self.compile(n, top)
            for j in jumps:
                self.code[j][1] = len(self.code)
        elif kind == "atomic":
            self.emit(ATOMIC)
            self.compile(node[1], False)
            self.emit(ATOMIC_END)
        elif kind == "look":
            look = self.emit(LOOK, 1 if node[2] else 0)
            self.compile(node[1], False)
            self.emit(LOOK_END)
            self.code[look][2] = len(self.code)
        elif kind == "rep":
            self.repeat(node, top)
        else:  # pragma: no cover - the parser makes no other node
            raise AssertionError(kind)

    def repeat(self, node, top: bool) -> None:
        _, body, low, high, kind = node
        if body[0] == "set":
            memo = -1
            if top and high < 0:
                memo = self.memo
                self.memo += 1
            if low == 1 and high == 1:
                self.compile(body, top)
                return
            self.emit(RUN, self.class_bit(body[1]), low, high, kind, memo)
            return
        if kind == RUN_POSSESSIVE:
            self.emit(ATOMIC)
            self.repeat(("rep", body, low, high, RUN_GREEDY), False)
            self.emit(ATOMIC_END)
            return
        for _ in range(low):
            self.compile(body, top)
        lazy = kind == RUN_LAZY
        if high < 0:  # loop: SPLIT body, out / body / JMP loop
            loop = self.emit(SPLIT)
            self.compile(body, top)
            self.emit(JMP, loop)
            self.set_split(loop, loop + 1, len(self.code), lazy)
            return
        splits = []
        for _ in range(high - low):
            splits.append(self.emit(SPLIT))
            self.compile(body, top)
        for s in splits:
            self.set_split(s, s + 1, len(self.code), lazy)

    def set_split(self, at: int, body: int, out: int, lazy: bool) -> None:
        self.code[at][1], self.code[at][2] = (out, body) if lazy else (body, out)


def _jumps_to_match(code: list[list[int]]) -> None:
    """A ``JMP`` that leads (through more jumps) to ``MATCH`` becomes that ``MATCH``: the same match at
    the same position, one dispatch fewer for every match that ends an alternative."""
    for row in code:
        if row[0] != JMP:
            continue
        target, seen = row[1], set()
        while code[target][0] == JMP and target not in seen:
            seen.add(target)
            target = code[target][1]
        if code[target][0] == MATCH:
            row[:] = code[target]


def _possessify(code: list[list[int]], masks: list[np.ndarray], class_bit) -> None:
    """Make greedy ``RUN`` s possessive where giving characters back can never help (fewer backtrack
    entries; the same matches): when what follows always succeeds (``JMP`` s, then runs that may be
    empty, then ``MATCH``; a match then ends at the run's end, and had it been empty there was
    nothing to give back), or when what follows must first consume a character the run's class
    cannot hold (the position after a given-back character holds one of the run's own). Other
    greedy runs get their follower (column 6): the class bit (``class_bit(mask)``) of the character
    what follows must start with, when it must consume one, else -1 (see ``regex_vm``)."""
    def follow(pc):
        while code[pc][0] == JMP:
            pc = code[pc][1]
        return pc

    def always_succeeds(pc):
        for _ in range(len(code)):
            pc = follow(pc)
            if code[pc][0] == MATCH:
                return True
            if code[pc][0] == RUN and code[pc][2] == 0 and code[pc][4] != RUN_LAZY:
                pc += 1
                continue
            return False
        return False

    def first_consumed(pc):
        """Mask of the character the instruction at ``pc`` must consume first, or None."""
        pc = follow(pc)
        op = code[pc][0]
        if op == CHAR:
            mask = np.zeros(MAX_CP, dtype=bool)
            mask[code[pc][1]] = True
            return mask
        if op == CLASS or (op == RUN and code[pc][2] >= 1):
            return masks[code[pc][1]]
        return None

    for pc, row in enumerate(code):
        if row[0] != RUN or row[4] != RUN_GREEDY:
            continue
        if always_succeeds(pc + 1):
            row[4], row[5] = RUN_POSSESSIVE, -1  # never fails after it: nothing to remember either
            continue
        follower = first_consumed(pc + 1)
        if follower is None:
            continue
        if not (follower & masks[row[1]]).any():
            row[4] = RUN_POSSESSIVE
        else:
            row[6] = class_bit(follower, optional=True)


def _class_tables(masks: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Two-level table of the class bits of every code point: ``stage2[stage1[cp >> 8] * 256 + (cp & 255)]``;
    block 0 (code points below 256) is stored first, so ``stage2[cp]`` for them."""
    bits = np.zeros(MAX_CP, dtype=np.uint64)
    for k, mask in enumerate(masks):
        bits[mask] |= np.uint64(1) << np.uint64(k)
    blocks = bits.reshape(MAX_CP >> 8, 256)
    index: dict[bytes, int] = {}
    stage1 = np.empty(blocks.shape[0], dtype=np.int32)
    rows = []
    for k in range(blocks.shape[0]):  # block 0 is met first, so it is row 0
        key = blocks[k].tobytes()
        row = index.get(key)
        if row is None:
            row = index[key] = len(rows)
            rows.append(k)
        stage1[k] = row
    stage2 = np.ascontiguousarray(blocks[rows].reshape(-1))
    return stage1, stage2


class Regex:
    """A compiled pre-tokenizer regex: ``pattern`` (its source), ``program`` (what kernels take)."""

    def __init__(self, pattern: str, source: str = "pattern", dialect: str = "regex"):
        if not isinstance(pattern, str):
            raise TokenizerError(f"{source}: expected the regex as a string, got {type(pattern).__name__}")
        if dialect not in DIALECTS:
            raise TokenizerError(f"{source}: dialect {dialect!r} (expected one of {', '.join(DIALECTS)})")
        self.pattern = pattern
        self.source = source
        self.dialect = dialect
        parser = Parser(pattern, source, dialect)
        tree = parser.parse()
        compiler = _Compiler(parser)
        for mask in class_sets(tree):  # the pattern's own classes take bits before the branch guards
            compiler.class_bit(mask)
        compiler.compile(tree, True)
        compiler.emit(MATCH)
        first = None if nullable(tree) else first_set(tree)
        if first is not None and first.all():
            first = None  # any character may start a match: no first-character test
        first_bit = -1 if first is None else compiler.class_bit(first, optional=True)
        _possessify(compiler.code, compiler.masks, compiler.class_bit)
        _jumps_to_match(compiler.code)
        stage1, stage2 = _class_tables(compiler.masks)
        code = np.array(compiler.code, dtype=np.int32).reshape(-1, 7)
        self.program = RegexProgram(code, stage1, stage2, np.int64(first_bit), np.int64(max(compiler.memo, 1)))

    def __reduce__(self):
        return (_compile_with_source, (self.pattern, self.source, self.dialect))

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})" if self.dialect == "regex" else f"Regex({self.pattern!r}, {self.dialect!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Regex) and (other.pattern, other.dialect) == (self.pattern, self.dialect)

    def __hash__(self) -> int:
        return hash((self.pattern, self.dialect))

    def find_spans(self, data, *, iteration: str = "regex") -> np.ndarray:
        """Byte ``[start, end)`` (int64, shape (k, 2)) of the matches of valid UTF-8 ``data`` (bytes or a
        1-d uint8 array), as ``regex.finditer(pattern, text)`` gives them, empty matches included.
        ``iteration="oniguruma"``: as Oniguruma's iterator (Hugging Face's ``Split``) gives them; the
        two differ only around empty matches (``engine.kernels.regex_vm``)."""
        if iteration not in ("regex", "oniguruma"):
            raise TokenizerError(f"find_spans: iteration={iteration!r} (expected 'regex' or 'oniguruma')")
        buf = _as_buffer(data)
        out = np.empty((2 * buf.shape[0] + 2, 2), dtype=np.int64)
        count = find_matches(buf, 0, buf.shape[0], self.program, out, iteration == "oniguruma")
        return out[:count].copy()


def _as_buffer(data) -> np.ndarray:
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        buf = np.frombuffer(raw, dtype=np.uint8)
    elif isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1:
        buf = np.ascontiguousarray(data)
        raw = buf.tobytes()
    else:
        raise TokenizerError(f"find_spans: expected bytes or a 1-d uint8 array, got {type(data).__name__}")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TokenizerError(f"find_spans: the data is not valid UTF-8 at byte {exc.start}") from None
    return buf


@functools.lru_cache(maxsize=64)
def _compile_with_source(pattern: str, source: str, dialect: str = "regex") -> Regex:
    return Regex(pattern, source, dialect)


def compile_regex(pattern: str, *, source: str = "pattern", dialect: str = "regex") -> Regex:
    """Compile ``pattern`` (cached); ``source`` names where it came from in error messages
    (e.g. ``"tokenizer.json pre_tokenizer"``); ``dialect="oniguruma"`` gives ``\\w`` (and ``\\b``)
    Oniguruma's meaning, as a tokenizer.json regex has it. Unsupported constructs raise
    ``TokenizerError``."""
    return _compile_with_source(pattern, source, dialect)


def reads_alike(pattern: str) -> bool:
    """True when ``pattern`` means the same under both dialects: no ``\\w``, ``\\W`` or ``\\b`` whose
    classes take the code points where Oniguruma and tiktoken differ, no ``^`` or ``$``."""
    a, b = compile_regex(pattern).program, compile_regex(pattern, dialect="oniguruma").program
    return all(np.array_equal(x, y) for x, y in zip(a, b))
