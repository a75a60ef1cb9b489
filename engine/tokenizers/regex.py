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
- anchors ``\\A``, ``\\z``, ``\\b``, ``\\B``, and ``^`` / ``$`` as Oniguruma means them: at the
  start / end of a line (``regex``'s ``MULTILINE`` meaning); ``\\Z`` and ``\\G`` are refused.

Refused by name: lookbehind, backreferences, conditionals, inline flags other than ``i``, POSIX
brackets, nested classes and ``&&``, ``\\h \\R \\X \\K`` and other escapes, a group that can match the
empty string under ``* + {m,}``, and under ``(?i)`` any literal or class that full case folding
would let Oniguruma match across several characters (``ß`` and ``ss``, ``ﬁ`` and ``fi``...).

Classes come from ``unicode_ranges`` / ``unicode_properties`` (the ``regex`` module's Unicode data):
``\\s`` is White_Space, ``\\d`` is ``\\p{Nd}``, ``\\w`` is ``regex``'s word class (Alphabetic, marks,
``\\p{Nd}``, ``\\p{Pc}``, ZWJ/ZWNJ). Oniguruma's ``\\w`` differs from it on U+200C/U+200D (not words
there) and on the other numbers ``\\p{No}`` (words there); other differences between the two are
Unicode versions (characters assigned after Oniguruma's tables). ``(?i)`` uses simple case folding
(``unicode_properties.FOLD_CLASSES``: for each character, what ``(?i)`` makes it match in ``regex``).

Matching (``Regex.find_spans``) is leftmost-first backtracking, as both engines do; see
``engine.kernels.regex_vm`` for the program, the empty-match rules and the cost.
"""

from __future__ import annotations

import functools

import numpy as np

from engine.errors import TokenizerError
from engine.kernels.regex_vm import (ASSERT, ATOMIC, ATOMIC_END, A_BOL, A_BOS, A_EOL, A_EOS, A_NWORDB, A_WORDB, CHAR,
                                     CLASS, JMP, LOOK, LOOK_END, MATCH, RUN, RUN_GREEDY, RUN_LAZY, RUN_POSSESSIVE, SPLIT,
                                     SPLIT_GUARD, RegexProgram, find_matches)

__all__ = ["Regex", "compile_regex", "MAX_CLASSES"]

MAX_CP = 0x110000
MAX_CLASSES = 64  # distinct classes of one pattern (one bit each in the class table)
MAX_PROGRAM = 20000  # instructions (bounded repetitions of groups are copied)

_GC_ALIASES = {
    "letter": "L", "casedletter": "LC", "l&": "LC", "uppercaseletter": "Lu", "lowercaseletter": "Ll",
    "titlecaseletter": "Lt", "modifierletter": "Lm", "otherletter": "Lo", "mark": "M", "combiningmark": "M",
    "nonspacingmark": "Mn", "spacingmark": "Mc", "enclosingmark": "Me", "number": "N", "decimalnumber": "Nd",
    "digit": "Nd", "letternumber": "Nl", "othernumber": "No", "punctuation": "P", "punct": "P",
    "connectorpunctuation": "Pc", "dashpunctuation": "Pd", "openpunctuation": "Ps", "closepunctuation": "Pe",
    "initialpunctuation": "Pi", "finalpunctuation": "Pf", "otherpunctuation": "Po", "symbol": "S",
    "mathsymbol": "Sm", "currencysymbol": "Sc", "modifiersymbol": "Sk", "othersymbol": "So", "separator": "Z",
    "spaceseparator": "Zs", "lineseparator": "Zl", "paragraphseparator": "Zp", "other": "C", "control": "Cc",
    "cntrl": "Cc", "format": "Cf", "privateuse": "Co", "unassigned": "Cn", "surrogate": "Cs",
}


@functools.lru_cache(maxsize=1)
def _categories() -> np.ndarray:
    """General category index (``unicode_properties.CATEGORIES``) of every code point (uint8)."""
    from engine.tokenizers.unicode_properties import CATEGORY_RUNS

    starts = np.array([s for s, _ in CATEGORY_RUNS] + [MAX_CP], dtype=np.int64)
    values = np.array([c for _, c in CATEGORY_RUNS], dtype=np.uint8)
    return np.repeat(values, np.diff(starts))


def _ranges_mask(ranges) -> np.ndarray:
    mask = np.zeros(MAX_CP, dtype=bool)
    for a, b in ranges:
        mask[a:b + 1] = True
    return mask


@functools.lru_cache(maxsize=None)
def _property(name: str) -> np.ndarray | None:
    """Mask of ``\\p{name}`` (read-only), or None if the name is unknown."""
    from engine.tokenizers.unicode_properties import CATEGORIES, SCRIPTS

    key = name.replace("_", "").replace(" ", "").replace("-", "")
    short = _GC_ALIASES.get(key.lower(), key)
    cats = _categories()
    mask = None
    if short in CATEGORIES:
        mask = cats == CATEGORIES.index(short)
    elif short == "LC":
        mask = np.isin(cats, [CATEGORIES.index(c) for c in ("Lu", "Ll", "Lt")])
    elif len(short) == 1 and short in "LMNPSZC":
        mask = np.isin(cats, [i for i, c in enumerate(CATEGORIES) if c[0] == short])
    elif key.lower() == "any":
        mask = np.ones(MAX_CP, dtype=bool)
    else:
        for script, ranges in SCRIPTS.items():
            if script.lower() == key.lower():
                mask = _ranges_mask(ranges)
    if mask is not None:
        mask.flags.writeable = False
    return mask


@functools.lru_cache(maxsize=None)
def _escape_class(letter: str) -> np.ndarray:
    from engine.tokenizers.unicode_properties import WORD_RANGES
    from engine.tokenizers.unicode_tables import WHITE_SPACE

    if letter in "sS":
        mask = np.zeros(MAX_CP, dtype=bool)
        mask[WHITE_SPACE] = True
    elif letter in "dD":
        mask = _property("Nd").copy()
    else:
        mask = _ranges_mask(WORD_RANGES)
    if letter.isupper():
        mask = ~mask
    mask.flags.writeable = False
    return mask


@functools.lru_cache(maxsize=1)
def _fold_pairs() -> tuple[np.ndarray, np.ndarray]:
    """(c, d) int64 arrays: ``(?i)c`` matches ``d`` (``unicode_properties.FOLD_CLASSES``; not transitive)."""
    from engine.tokenizers.unicode_properties import FOLD_CLASSES

    src = [entry[0] for entry in FOLD_CLASSES for _ in entry[1:]]
    dst = [d for entry in FOLD_CLASSES for d in entry[1:]]
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)


@functools.lru_cache(maxsize=1)
def _multi_folds() -> tuple[frozenset, np.ndarray]:
    """(full case folds of more than one character, mask of the characters that have one)."""
    from engine.tokenizers.unicode_properties import CATEGORIES

    strings, mask = set(), np.zeros(MAX_CP, dtype=bool)
    cased = np.flatnonzero(np.isin(_categories(), [CATEGORIES.index(c) for c in ("Lu", "Ll", "Lt")]))
    for cp in cased.tolist():  # only cased letters have multi-character folds
        folded = chr(cp).casefold()
        if len(folded) > 1:
            strings.add(folded)
            mask[cp] = True
    return frozenset(strings), mask


def _fold_closure(mask: np.ndarray) -> np.ndarray:
    """The characters ``(?i)`` makes a class of ``mask`` match."""
    src, dst = _fold_pairs()
    out = mask.copy()
    out[dst[mask[src]]] = True
    return out


# -- parser ---------------------------------------------------------------------------------------
# Nodes: ("set", mask, label), ("cat", [nodes]), ("alt", [nodes]), ("rep", node, min, max, kind),
# ("atomic", node), ("look", node, negative), ("assert", kind), ("empty",)


class _Parser:
    def __init__(self, pattern: str, source: str):
        self.p = pattern
        self.i = 0
        self.source = source

    def error(self, what: str, at: int | None = None) -> TokenizerError:
        at = self.i if at is None else at
        return TokenizerError(f"{self.source}: {what} at offset {at} of the regex {self.p!r} "
                              "(not supported by the pre-tokenizer regex compiler)")

    def peek(self) -> str | None:
        return self.p[self.i] if self.i < len(self.p) else None

    def parse(self):
        node = self.alternation(False)
        if self.i < len(self.p):
            raise self.error("unbalanced ')'")
        return node

    def alternation(self, icase: bool):
        branches = []
        while True:
            branch, icase_after = self.sequence(icase)
            branches.append(branch)
            if self.peek() == "|":
                self.i += 1
                icase = icase_after  # (?i) holds to the end of the enclosing group, across '|'
                continue
            return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self, icase: bool):
        items, literal_run = [], []
        while True:
            c = self.peek()
            if c is None or c in "|)":
                break
            start = self.i
            if c == "(" and self.p.startswith("(?", self.i):
                flags = self.inline_flags()
                if flags is not None:
                    icase = flags
                    continue
            atom, literal = self.atom(icase)
            atom = self.quantified(atom, start)
            if literal is not None and atom[0] == "set" and icase:
                literal_run.append((literal, start))
            else:
                self.check_multi_fold(literal_run)
                literal_run = []
            items.append(atom)
        self.check_multi_fold(literal_run)
        if not items:
            return ("empty",), icase
        return (items[0] if len(items) == 1 else ("cat", items)), icase

    def check_multi_fold(self, run) -> None:
        if len(run) < 2:
            return
        strings, _ = _multi_folds()
        text = "".join(ch for ch, _ in run).casefold()
        for folded in strings:
            at = text.find(folded)
            if at >= 0:
                raise self.error(f"case-insensitive {folded!r}, which full case folding matches as one character "
                                 "too (Oniguruma does, the regex module does not)", run[0][1])

    def inline_flags(self):
        """``(?i)`` / ``(?-i)``: the new case flag (and consumes it); None if this is not a flag group."""
        j = self.i + 2
        k = j
        while k < len(self.p) and (self.p[k].isalpha() or self.p[k] == "-"):
            k += 1
        if k >= len(self.p) or self.p[k] != ")" or k == j:
            return None
        flags = self.p[j:k]
        if flags not in ("i", "-i"):
            raise self.error(f"inline flags (?{flags})")
        self.i = k + 1
        return flags == "i"

    def atom(self, icase: bool):
        """(node, the literal character or None)."""
        c = self.p[self.i]
        start = self.i
        if c == "(":
            return self.group(icase), None
        if c == "[":
            return self.char_class(icase), None
        if c == ".":
            self.i += 1
            mask = np.ones(MAX_CP, dtype=bool)
            mask[0x0A] = False
            return ("set", mask, "."), None
        if c == "^":
            self.i += 1
            return ("assert", A_BOL), None
        if c == "$":
            self.i += 1
            return ("assert", A_EOL), None
        if c in "*+?":
            raise self.error(f"quantifier {c!r} with nothing to repeat")
        if c == "{" and self.quantifier_at(self.i) is not None:
            raise self.error("quantifier '{' with nothing to repeat")
        if c == "\\":
            return self.escape(icase, in_class=False)
        self.i += 1
        return self.literal(ord(c), icase, start), c

    def literal(self, cp: int, icase: bool, at: int):
        mask = np.zeros(MAX_CP, dtype=bool)
        mask[cp] = True
        if icase:
            if _multi_folds()[1][cp]:
                raise self.error(f"case-insensitive {chr(cp)!r}, whose full case folding has several characters", at)
            mask = _fold_closure(mask)
        return ("set", mask, chr(cp))

    def escape(self, icase: bool, in_class: bool):
        start = self.i
        self.i += 1
        if self.i >= len(self.p):
            raise self.error("a trailing backslash", start)
        c = self.p[self.i]
        self.i += 1
        simple = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B, "a": 0x07, "e": 0x1B}
        if c in simple:
            return self.literal(simple[c], icase, start), chr(simple[c])
        if c in "sSdDwW":
            return ("set", _escape_class(c), "\\" + c), None
        if c in "pP":
            return ("set", self.property(c == "P", start), self.p[start:self.i]), None
        if c == "x":
            if self.peek() == "{":
                end = self.p.find("}", self.i)
                digits = self.p[self.i + 1:end] if end > 0 else ""
                self.i = end + 1 if end > 0 else self.i
            else:
                digits = self.p[self.i:self.i + 2]
                self.i += 2
            return self.hex_literal(digits, icase, start)
        if c == "u":
            digits = self.p[self.i:self.i + 4]
            self.i += 4
            return self.hex_literal(digits, icase, start, exact=4)
        if not in_class:
            anchors = {"A": A_BOS, "z": A_EOS, "b": A_WORDB, "B": A_NWORDB}
            if c in anchors:
                return ("assert", anchors[c]), None
        if c.isalnum() or c == "_" or ord(c) > 0x7F:
            names = {"Z": "\\Z (end or before a final newline)", "G": "\\G", "h": "\\h (a hex digit in Oniguruma)",
                     "R": "\\R", "X": "\\X", "K": "\\K", "k": "a named backreference \\k", "b": "\\b inside a class"}
            what = names.get(c, "a backreference" if c.isdigit() else f"the escape \\{c}")
            raise self.error(what, start)
        return self.literal(ord(c), icase, start), c

    def hex_literal(self, digits: str, icase: bool, start: int, exact: int | None = None):
        try:
            if not digits or (exact and len(digits) != exact) or len(digits) > 8:
                raise ValueError
            cp = int(digits, 16)
        except ValueError:
            raise self.error(f"a malformed hexadecimal escape {self.p[start:self.i]!r}", start) from None
        if cp >= MAX_CP or 0xD800 <= cp <= 0xDFFF:
            raise self.error(f"the escape {self.p[start:self.i]!r} (not a Unicode scalar value)", start)
        return self.literal(cp, icase, start), chr(cp)

    def property(self, negated: bool, start: int) -> np.ndarray:
        if self.peek() != "{":
            raise self.error("a one-letter property without braces (expected \\p{Name})", start)
        end = self.p.find("}", self.i)
        if end < 0:
            raise self.error("an unterminated \\p{", start)
        name = self.p[self.i + 1:end]
        self.i = end + 1
        if name.startswith("^"):
            negated, name = not negated, name[1:]
        if "=" in name:
            key, _, value = name.partition("=")
            if key.strip().lower() not in ("gc", "general_category", "sc", "script"):
                raise self.error(f"the property {name!r}", start)
            name = value
        mask = _property(name.strip())
        if mask is None:
            raise self.error(f"the unknown or unsupported property or script {name!r}", start)
        return ~mask if negated else mask

    def char_class(self, icase: bool):
        start = self.i
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        mask = np.zeros(MAX_CP, dtype=bool)
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.error("an unterminated class '['", start)
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            at = self.i
            if c == "[":
                what = "a POSIX bracket [:name:]" if self.p.startswith("[:", self.i) else "a nested class"
                raise self.error(what, at)
            if self.p.startswith("&&", self.i):
                raise self.error("a class intersection &&", at)
            low = self.class_item()
            if isinstance(low, np.ndarray):
                mask |= low
                continue
            if self.peek() == "-" and self.i + 1 < len(self.p) and self.p[self.i + 1] != "]":
                self.i += 1
                high = self.class_item()
                if isinstance(high, np.ndarray):
                    raise self.error("a range that ends in a class escape", at)
                if high < low:
                    raise self.error(f"the empty range {chr(low)!r}-{chr(high)!r}", at)
                mask[low:high + 1] = True
            else:
                mask[low] = True
        if icase:
            if (mask & _multi_folds()[1]).any():
                cp = int(np.flatnonzero(mask & _multi_folds()[1])[0])
                raise self.error(f"a case-insensitive class holding {chr(cp)!r}, whose full case folding has several "
                                 "characters", start)
            mask = _fold_closure(mask)
        if negated:
            mask = ~mask
        return ("set", mask, self.p[start:self.i])

    def class_item(self):
        """A code point, or a mask for a class escape."""
        c = self.p[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        node, literal = self.escape(False, in_class=True)
        if literal is not None:
            return ord(literal)
        return node[1]

    def group(self, icase: bool):
        start = self.i
        kinds = {"(?:": None, "(?>": "atomic", "(?=": "ahead", "(?!": "not ahead"}
        kind = None
        for prefix, k in kinds.items():
            if self.p.startswith(prefix, self.i):
                self.i += 3
                kind = k
                break
        else:
            if self.p.startswith("(?<=", self.i) or self.p.startswith("(?<!", self.i):
                raise self.error("lookbehind", start)
            if self.p.startswith("(?P<", self.i) or (self.p.startswith("(?<", self.i)):
                end = self.p.find(">", self.i)
                name = self.p[self.i + (4 if self.p[self.i + 2] == "P" else 3):end]
                if end < 0 or not name.replace("_", "a").isalnum():
                    raise self.error("a malformed group name", start)
                self.i = end + 1
            elif self.p.startswith("(?", self.i):
                j = self.i + 2
                k = j
                while k < len(self.p) and (self.p[k].isalpha() or self.p[k] == "-"):
                    k += 1
                flags = self.p[j:k]
                if k < len(self.p) and self.p[k] == ":" and flags in ("i", "-i"):
                    self.i = k + 1
                    icase = flags == "i"
                elif k < len(self.p) and self.p[k] == ":" and flags:
                    raise self.error(f"the inline flags (?{flags}:", start)
                else:
                    raise self.error(f"the group syntax {self.p[self.i:self.i + 3]!r}", start)
            else:
                self.i += 1
        body = self.alternation(icase)
        if self.peek() != ")":
            raise self.error("an unterminated group '('", start)
        self.i += 1
        if kind == "atomic":
            return ("atomic", body)
        if kind is not None:
            return ("look", body, kind == "not ahead")
        return body

    def quantifier_at(self, i: int):
        """(min, max or -1, end offset) of a ``{...}`` quantifier at ``i``, or None (then ``{`` is a literal)."""
        end = self.p.find("}", i)
        if end < 0:
            return None
        inner = self.p[i + 1:end]
        if inner.strip() != inner or inner == ",":
            raise self.error(f"the quantifier {{{inner}}} (a repetition in the regex module, literal text in "
                             "Oniguruma)", i)
        lo, comma, hi = inner.partition(",")
        if not (lo.isdigit() or (comma and lo == "" and hi.isdigit())) or (hi and not hi.isdigit()):
            return None
        low = int(lo) if lo else 0
        high = int(hi) if hi else (-1 if comma else low)
        return low, high, end + 1

    def quantified(self, atom, start: int):
        c = self.peek()
        if c is None or c not in "*+?{":
            return atom
        at = self.i
        if c == "{":
            found = self.quantifier_at(self.i)
            if found is None:
                return atom
            low, high, self.i = found
            braces = True
        else:
            self.i += 1
            low, high = {"*": (0, -1), "+": (1, -1), "?": (0, 1)}[c]
            braces = False
        if high >= 0 and high < low:
            raise self.error(f"the quantifier {self.p[at:self.i]!r} (max below min)", at)
        if max(low, high) > 100000:
            raise self.error(f"the quantifier {self.p[at:self.i]!r} (counts above 100000)", at)
        kind = RUN_GREEDY
        if self.peek() == "?":
            self.i += 1
            kind = RUN_LAZY
        elif self.peek() == "+":
            if braces:
                raise self.error("'+' after a {m,n} quantifier (possessive in the regex module, a repetition of "
                                 "the repetition in Oniguruma)", self.i)
            self.i += 1
            kind = RUN_POSSESSIVE
        if atom[0] in ("assert", "look", "empty"):
            raise self.error("a quantifier on an empty group" if atom[0] == "empty" else "a quantifier on an assertion",
                             at)
        nxt = self.peek()
        if nxt is not None and (nxt in "*+?" or (nxt == "{" and self.quantifier_at(self.i) is not None)):
            raise self.error("a quantifier after a quantifier", self.i)
        if atom[0] != "set" and (high < 0) and _nullable(atom):
            raise self.error("an unbounded repetition of a group that can match the empty string", start)
        return ("rep", atom, low, high, kind)


def _nullable(node) -> bool:
    kind = node[0]
    if kind == "set":
        return False
    if kind in ("assert", "look", "empty"):
        return True
    if kind == "cat":
        return all(_nullable(n) for n in node[1])
    if kind == "alt":
        return any(_nullable(n) for n in node[1])
    if kind == "rep":
        return node[2] == 0 or _nullable(node[1])
    return _nullable(node[1])  # atomic


def _sets(node):
    """The masks of every class of ``node`` (that matches more than one character)."""
    if node[0] == "set":
        if node[1].sum() != 1:
            yield node[1]
    elif node[0] in ("cat", "alt"):
        for n in node[1]:
            yield from _sets(n)
    elif node[0] in ("rep", "atomic", "look"):
        yield from _sets(node[1])


def _first(node) -> np.ndarray | None:
    """Mask of the characters a non-empty match of ``node`` can start with (a superset), or None for any."""
    kind = node[0]
    if kind == "set":
        return node[1]
    if kind in ("assert", "look", "empty"):
        return np.zeros(MAX_CP, dtype=bool)
    if kind == "alt":
        out = np.zeros(MAX_CP, dtype=bool)
        for n in node[1]:
            f = _first(n)
            if f is None:
                return None
            out = out | f
        return out
    if kind == "cat":
        out = np.zeros(MAX_CP, dtype=bool)
        for n in node[1]:
            f = _first(n)
            if f is None:
                return None
            out = out | f
            if not _nullable(n):
                return out
        return out
    return _first(node[1])  # rep, atomic


# -- compiler -------------------------------------------------------------------------------------


class _Compiler:
    def __init__(self, parser: _Parser):
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
        self.code.append([op, a, b, c, d, e])
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
            word = self.class_bit(_escape_class("w")) if node[1] in (A_WORDB, A_NWORDB) else 0
            self.emit(ASSERT, node[1], word)
        elif kind == "cat":
            for n in node[1]:
                self.compile(n, top)
        elif kind == "alt":
            jumps = []
            branches = node[1]
            for k, n in enumerate(branches):
                if k < len(branches) - 1:
                    first = None if _nullable(n) else _first(n)
                    guard = -1 if first is None else self.class_bit(first, optional=True)
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


def _possessify(code: list[list[int]], masks: list[np.ndarray]) -> None:
    """Make greedy ``RUN`` s possessive where giving characters back can never help (fewer backtrack
    entries; the same matches): when what follows always succeeds (``JMP`` s, then runs that may be
    empty, then ``MATCH``; a match then ends at the run's end, and had it been empty there was
    nothing to give back), or when what follows must first consume a character the run's class
    cannot hold (the position after a given-back character holds one of the run's own)."""
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

    def must_consume_outside(pc, mask):
        pc = follow(pc)
        op = code[pc][0]
        if op == CHAR:
            return not mask[code[pc][1]]
        if op == CLASS or (op == RUN and code[pc][2] >= 1):
            return not (masks[code[pc][1]] & mask).any()
        return False

    for pc, row in enumerate(code):
        if row[0] != RUN or row[4] != RUN_GREEDY:
            continue
        if always_succeeds(pc + 1):
            row[4], row[5] = RUN_POSSESSIVE, -1  # never fails after it: nothing to remember either
        elif must_consume_outside(pc + 1, masks[row[1]]):
            row[4] = RUN_POSSESSIVE


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

    def __init__(self, pattern: str, source: str = "pattern"):
        if not isinstance(pattern, str):
            raise TokenizerError(f"{source}: expected the regex as a string, got {type(pattern).__name__}")
        self.pattern = pattern
        self.source = source
        parser = _Parser(pattern, source)
        tree = parser.parse()
        compiler = _Compiler(parser)
        for mask in _sets(tree):  # the pattern's own classes take bits before the branch guards
            compiler.class_bit(mask)
        compiler.compile(tree, True)
        compiler.emit(MATCH)
        nullable = _nullable(tree)
        first = None if nullable else _first(tree)
        first_bit = -1 if first is None else compiler.class_bit(first, optional=True)
        _possessify(compiler.code, compiler.masks)
        stage1, stage2 = _class_tables(compiler.masks)
        code = np.array(compiler.code, dtype=np.int32).reshape(-1, 6)
        self.program = RegexProgram(code, stage1, stage2, np.int64(first_bit), np.int64(max(compiler.memo, 1)))

    def __reduce__(self):
        return (compile_regex, (self.pattern,), None) if self.source == "pattern" else (
            _compile_with_source, (self.pattern, self.source))

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Regex) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def find_spans(self, data) -> np.ndarray:
        """Byte ``[start, end)`` (int64, shape (k, 2)) of the matches of valid UTF-8 ``data`` (bytes or a
        1-d uint8 array), as ``regex.finditer(pattern, text)`` gives them, empty matches included."""
        buf = _as_buffer(data)
        out = np.empty((2 * buf.shape[0] + 2, 2), dtype=np.int64)
        count = find_matches(buf, 0, buf.shape[0], self.program, out)
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
def _compile_with_source(pattern: str, source: str) -> Regex:
    return Regex(pattern, source)


def compile_regex(pattern: str, *, source: str = "pattern") -> Regex:
    """Compile ``pattern`` (cached); ``source`` names where it came from in error messages
    (e.g. ``"tokenizer.json pre_tokenizer"``). Unsupported constructs raise ``TokenizerError``."""
    return _compile_with_source(pattern, source)
