"""The pre-tokenizer regex syntax (``engine.tokenizers.regex`` lists what it takes and refuses): the
parser, to a tree of nodes, and the Unicode classes those nodes hold (masks over all code points).

Nodes: ``("set", mask, label)`` one character of a class, ``("cat", [nodes])``, ``("alt", [nodes])``,
``("rep", node, min, max or -1, kind)``, ``("atomic", node)``, ``("look", node, negative)``,
``("assert", kind)``, ``("empty",)``. Literals are one-character sets; ``(?i)`` turns them and
classes into their case-folding closures as the parser meets them.
"""

from __future__ import annotations

import functools

import numpy as np

from engine.errors import TokenizerError
from engine.kernels.regex_vm import A_BOL, A_BOS, A_EOL, A_EOS, A_NWORDB, A_WORDB, RUN_GREEDY, RUN_LAZY, RUN_POSSESSIVE

__all__ = ["MAX_CP", "Parser", "nullable", "first_set", "class_sets", "escape_class"]

MAX_CP = 0x110000

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
def code_point_categories() -> np.ndarray:
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
    cats = code_point_categories()
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


# Oniguruma's \w (what a tokenizer.json regex means): tiktoken's and the regex module's, but for the
# Latin-1 numbers it takes outside a bracket class (² ³ ¹ ¼ ½ ¾; [\w] does not) and the joiners it leaves
# (U+200C, U+200D), as asked of it in tests/test_unicode_version.py.
ONIGURUMA_WORD_ADDS = (0xB2, 0xB3, 0xB9, 0xBC, 0xBD, 0xBE)
ONIGURUMA_WORD_LEAVES = (0x200C, 0x200D)
DIALECTS = ("regex", "oniguruma")


@functools.lru_cache(maxsize=None)
def escape_class(letter: str, dialect: str = "regex", in_class: bool = False) -> np.ndarray:
    """The code points of ``\\s \\S \\d \\D \\w \\W`` (``dialect`` "oniguruma": its ``\\w``, which
    takes the Latin-1 numbers only outside a bracket class: ``[\\w]`` does not)."""
    from engine.tokenizers.unicode_properties import WORD_RANGES
    from engine.tokenizers.unicode_tables import WHITE_SPACE

    if letter in "sS":
        mask = np.zeros(MAX_CP, dtype=bool)
        mask[WHITE_SPACE] = True
    elif letter in "dD":
        mask = _property("Nd").copy()
    else:
        mask = _ranges_mask(WORD_RANGES).copy()
        if dialect == "oniguruma":
            if not in_class:
                mask[list(ONIGURUMA_WORD_ADDS)] = True
            mask[list(ONIGURUMA_WORD_LEAVES)] = False
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
    cased = np.flatnonzero(np.isin(code_point_categories(), [CATEGORIES.index(c) for c in ("Lu", "Ll", "Lt")]))
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

class Parser:
    def __init__(self, pattern: str, source: str, dialect: str = "regex"):
        self.p = pattern
        self.i = 0
        self.source = source
        self.dialect = dialect

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
                    if items:  # Oniguruma: /ab(?i)c|d/ is /ab(?i:c|d)/; the regex module reads it otherwise
                        raise self.error("an inline flag group (?i) after the start of a branch (use (?i:...))",
                                         start)
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
        if c == "^":  # Oniguruma: a line's start; tiktoken (Rust's regex crate): the text's
            self.i += 1
            return ("assert", A_BOL if self.dialect == "oniguruma" else A_BOS), None
        if c == "$":  # Oniguruma: a line's end; tiktoken: the text's end (not before a final newline)
            self.i += 1
            return ("assert", A_EOL if self.dialect == "oniguruma" else A_EOS), None
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
            return ("set", escape_class(c, self.dialect, in_class), "\\" + c), None
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
        if atom[0] != "set" and (high < 0) and nullable(atom):
            raise self.error("an unbounded repetition of a group that can match the empty string", start)
        return ("rep", atom, low, high, kind)


def nullable(node) -> bool:
    kind = node[0]
    if kind == "set":
        return False
    if kind in ("assert", "look", "empty"):
        return True
    if kind == "cat":
        return all(nullable(n) for n in node[1])
    if kind == "alt":
        return any(nullable(n) for n in node[1])
    if kind == "rep":
        return node[2] == 0 or nullable(node[1])
    return nullable(node[1])  # atomic


def class_sets(node):
    """The masks of every class of ``node`` (that matches more than one character)."""
    if node[0] == "set":
        if node[1].sum() != 1:
            yield node[1]
    elif node[0] in ("cat", "alt"):
        for n in node[1]:
            yield from class_sets(n)
    elif node[0] in ("rep", "atomic", "look"):
        yield from class_sets(node[1])


def first_set(node) -> np.ndarray | None:
    """Mask of the characters a non-empty match of ``node`` can start with (a superset), or None for any."""
    kind = node[0]
    if kind == "set":
        return node[1]
    if kind in ("assert", "look", "empty"):
        return np.zeros(MAX_CP, dtype=bool)
    if kind == "alt":
        out = np.zeros(MAX_CP, dtype=bool)
        for n in node[1]:
            f = first_set(n)
            if f is None:
                return None
            out = out | f
        return out
    if kind == "cat":
        out = np.zeros(MAX_CP, dtype=bool)
        for n in node[1]:
            f = first_set(n)
            if f is None:
                return None
            out = out | f
            if not nullable(n):
                return out
        return out
    return first_set(node[1])  # rep, atomic
