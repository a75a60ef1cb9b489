"""Plain-Python twin of ``engine.kernels.regex_vm``: the same compiled program, run by recursion.

``naive_match(program, text_bytes, start, stop, pos, forbid_empty)`` follows the program with one
recursive call per choice (no backtrack stack, no failure memo), so it checks the kernel's stack,
its run entries, atomic/lookahead cuts and the memo. ``naive_find_spans`` / ``naive_piece_ends``
are the two iterations (``regex``'s finditer, and Oniguruma's as Hugging Face's ``Split`` uses it).
Exponential in the worst case; for short texts only.
"""

from __future__ import annotations

import sys

from engine.kernels.regex_vm import (ASSERT, ATOMIC, ATOMIC_END, A_BOL, A_BOS, A_EOL, A_EOS, A_WORDB, CHAR, CLASS, JMP,
                                     LOOK, MATCH, RUN, RUN_GREEDY, RUN_LAZY, SPLIT, SPLIT_GUARD, SPLIT_GUARD2)

# The twin recurses once per choice; the deeper limit is raised only while it runs (raised for the whole
# session, it let json's C decoder recurse into a segmentation fault on deeply nested test input).
_DEPTH = 100000


class _Text:
    def __init__(self, data: bytes, start: int, stop: int, program):
        self.data, self.start, self.stop = data, start, stop
        self.code = [list(map(int, row)) for row in program.code]
        self.stage1, self.stage2 = program.stage1, program.stage2

    def char(self, i):
        """(code point, width) at i, or None at stop."""
        if i >= self.stop:
            return None
        text = self.data[i:i + 4].decode("utf-8", "ignore")
        ch = text[0]
        return ord(ch), len(ch.encode("utf-8"))

    def has(self, cp, bit):
        if cp < 256:
            bits = int(self.stage2[cp])
        else:
            bits = int(self.stage2[int(self.stage1[cp >> 8]) * 256 + (cp & 255)])
        return (bits >> bit) & 1 == 1

    def in_class(self, i, bit):
        c = self.char(i)
        return c[1] if c is not None and self.has(c[0], bit) else 0

    def previous(self, i):
        i -= 1
        while self.data[i] & 0xC0 == 0x80:
            i -= 1
        return i


def _run(t: _Text, pc: int, pos: int, until: int | None, ok):
    """Run from (pc, pos) to the end instruction ``until`` (an ATOMIC_END / LOOK_END pc) or to MATCH;
    calls ``ok(pos, pc_after)`` there and returns its result (None = fail, back up)."""
    while True:
        op, a, b, c, d = t.code[pc][:5]
        if pc == until:
            return ok(pos, pc)
        if op == MATCH:
            return ok(pos, pc)
        if op == CHAR:
            ch = t.char(pos)
            if ch is None or ch[0] != a:
                return None
            pos += ch[1]
            pc += 1
        elif op == CLASS:
            w = t.in_class(pos, a)
            if not w:
                return None
            pos += w
            pc += 1
        elif op == JMP:
            pc = a
        elif op in (SPLIT, SPLIT_GUARD, SPLIT_GUARD2):
            if op == SPLIT_GUARD and not t.in_class(pos, c):
                pc = b
                continue
            if op == SPLIT_GUARD2 and not t.in_class(pos, c):
                w = t.in_class(pos, d)
                if not w or not t.in_class(pos + w, c):
                    pc = b
                    continue
            r = _run(t, a, pos, until, ok)
            if r is not None:
                return r
            pc = b
        elif op == RUN:
            ends = [pos]
            p = pos
            while c < 0 or len(ends) - 1 < c:
                w = t.in_class(p, a)
                if not w:
                    break
                p += w
                ends.append(p)
            if len(ends) - 1 < b:
                return None
            candidates = ends[b:]
            if d == RUN_GREEDY:
                candidates = candidates[::-1]
            elif d != RUN_LAZY:  # possessive
                candidates = candidates[-1:]
            for q in candidates:
                r = _run(t, pc + 1, q, until, ok)
                if r is not None:
                    return r
            return None
        elif op == ATOMIC:
            depth, end = 0, pc + 1
            while True:  # the matching ATOMIC_END
                if t.code[end][0] == ATOMIC:
                    depth += 1
                elif t.code[end][0] == ATOMIC_END:
                    if depth == 0:
                        break
                    depth -= 1
                end += 1
            inner = _run(t, pc + 1, pos, end, lambda q, _pc: q)
            if inner is None:
                return None
            pos, pc = inner, end + 1
        elif op == LOOK:
            end = b - 1  # the LOOK_END
            inner = _run(t, pc + 1, pos, end, lambda q, _pc: q)
            if (inner is not None) == (a != 0):
                return None
            pc = b
        elif op == ASSERT:
            if a == A_BOL:
                good = pos == t.start or t.data[pos - 1] == 10
            elif a == A_EOL:
                good = pos == t.stop or t.data[pos] == 10
            elif a == A_BOS:
                good = pos == t.start
            elif a == A_EOS:
                good = pos == t.stop
            else:
                before = pos > t.start and t.has(t.char(t.previous(pos))[0], b)
                after = t.in_class(pos, b) > 0
                good = (before != after) if a == A_WORDB else (before == after)
            if not good:
                return None
            pc += 1
        else:
            raise AssertionError(op)


def naive_match(program, data: bytes, start: int, stop: int, pos: int, forbid_empty: bool) -> int:
    t = _Text(data, start, stop, program)

    def ok(q, pc):
        return None if forbid_empty and q == pos else q
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _DEPTH))
    try:
        r = _run(t, 0, pos, None, ok)
    finally:
        sys.setrecursionlimit(limit)
    return -1 if r is None else r


def _next_char(data: bytes, i: int) -> int:
    i += 1
    while i < len(data) and data[i] & 0xC0 == 0x80:
        i += 1
    return i


def _search(program, data, start, stop, pos, forbid_at):
    while pos <= stop:
        e = naive_match(program, data, start, stop, pos, pos == forbid_at)
        if e >= 0:
            return pos, e
        if pos >= stop:
            break
        pos = _next_char(data, pos)
    return -1, -1


def naive_find_spans(program, data: bytes) -> list[tuple[int, int]]:
    out, pos, forbid = [], 0, -1
    while pos <= len(data):
        s, e = _search(program, data, 0, len(data), pos, forbid)
        if s < 0:
            break
        out.append((s, e))
        pos, forbid = e, (e if e == s else -1)
    return out


def naive_onig_spans(program, data: bytes) -> list[tuple[int, int]]:
    """The matches of Oniguruma's iterator (the ``onig`` crate's ``find_iter``, which Hugging Face's ``Split`` uses)."""
    matches, last_end, last_match_end = [], 0, None
    while last_end <= len(data):
        s, e = _search(program, data, 0, len(data), last_end, -1)
        if s < 0:
            break
        if e == s and last_match_end == e:
            if last_end >= len(data):
                break
            last_end = _next_char(data, last_end)
            continue
        last_end = last_match_end = e
        matches.append((s, e))
    return matches


def naive_piece_ends(program, data: bytes) -> list[int]:
    """Piece ends of Hugging Face's ``Split`` (Isolated): every match start and end."""
    matches = naive_onig_spans(program, data)
    ends, prev = [], 0
    for s, e in matches:
        if s > prev:
            ends.append(s)
        if e > s:
            ends.append(e)
        prev = e
    if prev < len(data):
        ends.append(len(data))
    return ends


def naive_piece_matches(program, pieces: list[bytes], oniguruma: bool) -> list[tuple[int, int, int]]:
    """``find_piece_matches``: each piece searched as its own text, ``(start, end, piece)`` in piece offsets."""
    spans = naive_onig_spans if oniguruma else naive_find_spans
    return [(s, e, p) for p, piece in enumerate(pieces) for s, e in spans(program, piece)]
