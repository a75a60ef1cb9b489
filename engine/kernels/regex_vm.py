"""A backtracking matcher for compiled pre-tokenizer regexes (``engine.tokenizers.regex`` compiles them).

A program (``RegexProgram``) is ``code``, int32 rows ``(op, a, b, c, d, e, f)``, and a two-level class
table: the class bits of code point ``cp`` are ``stage2[stage1[cp >> 8] * 256 + (cp & 255)]``
(``stage2[cp]`` below 256). The matcher runs on valid UTF-8 bytes, decoding a character where an
instruction reads one. Instructions:

- ``CHAR cp``, ``CLASS bit``: one character equal to ``cp`` / in the class;
- ``RUN bit, min, max(-1: none), kind, memo, follower``: a repetition of one class, greedy (takes
  the whole run, then gives characters back one at a time; when what follows must start with a
  character of class ``follower``, straight back to the last such character), lazy (takes ``min``, then one more each time the
  rest fails) or possessive (the whole run, never given back); one backtrack entry per run;
- ``SPLIT x, y`` (try x, then y); ``SPLIT_GUARD x, y, bit``: the same when the character at the
  position is in the class (the first characters of branch x), else straight to y; ``SPLIT_GUARD2
  x, y, bit, optional``: for a branch ``[optional]?[bit]...``, the same when the character is in
  ``bit``, or in ``optional`` with the next one in ``bit``; ``JMP x``;
- ``ATOMIC`` ... ``ATOMIC_END``: on reaching the end, the backtrack entries made inside are dropped;
- ``LOOK negative, after`` ... ``LOOK_END``: lookahead; the body runs from the position, then the
  entries made inside are dropped and the match goes on at ``after`` from the saved position (or,
  for a negative one, fails; a failed body makes it go on);
- ``ASSERT kind, bit``: ``^`` (start or after ``\\n``), ``$`` (end or before ``\\n``), ``\\A``,
  ``\\z``, ``\\b``, ``\\B`` (``bit``: the class of word characters);
- ``MATCH``.

Semantics are leftmost-first: at each start position the alternatives and repetitions are tried in
priority order and the first path that reaches ``MATCH`` wins. Two iterations over matches:

- ``find_matches`` (``Regex.find_spans``) is the ``regex`` module's ``finditer``: after an empty
  match at p the next search starts at p but may not end there empty; after a non-empty match
  ending at p an empty match at p is allowed.
- ``find_matches(..., oniguruma=True)`` is Oniguruma's iterator (the ``onig`` crate's
  ``find_iter``, which Hugging Face's ``Split`` uses): an empty match right where the previous match
  ended is skipped and the search goes on one character further; after an empty match at p nothing
  non-empty is looked for at p.
- ``regex_piece_ends`` (the pre-tokenizer: Hugging Face's ``Split`` with the ``Isolated``
  behaviour, over Oniguruma's iterator) cuts the text at every match start and end, so the pieces
  are the matches and the text between them; an empty match right where the previous match ended
  is skipped and the search goes on one character further (Oniguruma's rule as the ``onig`` crate
  iterates); empty pieces do not exist. Both iterations give the same pieces whenever the pattern
  cannot match the empty string (every pre-tokenizer pattern of real tokenizers).
- ``find_piece_matches`` runs either iteration over many texts laid end to end in one buffer (the
  pieces a ``Split`` step cuts), each its own text, in one call: a call costs the reference counts
  of the arrays it takes, more than a short piece's search, so the matcher loops over the pieces
  itself.

Cost. A repetition of one class is one backtrack entry, not one per character. Failures are
remembered: when a greedy, lazy or possessive unbounded ``RUN`` outside atomic groups and
lookaheads has been fully given back and failed, its entry position and the end of its run are
stored (``memo``); an entry inside that interval later (at any start position in the same text)
fails at once, since its run ends at the same place and its candidates are a subset. So a 1 MB
run of one character costs O(n) even for ``\\s+$``. Repetitions of groups backtrack as in
Oniguruma (a pattern can be made exponential); the patterns of real tokenizers repeat only
classes.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from engine.kernels import kernel

__all__ = [
    "RegexProgram", "find_matches", "find_piece_matches", "regex_piece_ends", "regex_pretokenize_ends", "regex_final_piece_ends",
    "MATCH", "CHAR", "CLASS", "RUN", "SPLIT_GUARD2", "SPLIT_GUARD", "JMP", "ATOMIC", "ATOMIC_END", "LOOK", "LOOK_END", "ASSERT",
]

# code: int32 (n, 7); stage1 int32; stage2 uint64; first: class bit of the first characters of a
# match (-1: any, or the pattern can match empty); memo_slots: entries of the failure memo.
RegexProgram = namedtuple("RegexProgram", ("code", "stage1", "stage2", "first", "memo_slots"))

MATCH, CHAR, CLASS, RUN, SPLIT, SPLIT_GUARD, JMP, ATOMIC, ATOMIC_END, LOOK, LOOK_END, ASSERT, SPLIT_GUARD2 = range(13)
RUN_GREEDY, RUN_LAZY, RUN_POSSESSIVE = 0, 1, 2
A_BOL, A_EOL, A_BOS, A_EOS, A_WORDB, A_NWORDB = range(6)

# Backtrack entries: (type, pc, a, b, c, d)
BT_PC, BT_GREEDY, BT_LAZY, BT_POSSESSIVE, BT_ATOMIC, BT_LOOK = range(6)


@kernel(inline="always")
def _decode(buf, i):
    b0 = np.int64(buf[i])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xE0:
        return ((b0 & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F), 2
    if b0 < 0xF0:
        return ((b0 & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F), 3
    return (((b0 & 0x07) << 18) | ((np.int64(buf[i + 1]) & 0x3F) << 12) | ((np.int64(buf[i + 2]) & 0x3F) << 6)
            | (np.int64(buf[i + 3]) & 0x3F)), 4


@kernel(inline="always")
def _bits(cp, stage1, stage2):
    if cp < 256:
        return stage2[cp]
    return stage2[np.int64(stage1[cp >> 8]) * 256 + (cp & 255)]


@kernel(inline="always")
def _in_class(buf, i, stop, bit, stage1, stage2):
    """Width of the character at ``i`` if it is in class ``bit``, else 0 (also at ``stop``)."""
    if i >= stop:
        return 0
    cp, width = _decode(buf, i)
    if (_bits(cp, stage1, stage2) >> np.uint64(bit)) & np.uint64(1):
        return width
    return 0


@kernel(inline="always")
def _previous(buf, i):
    """Start of the character that ends at ``i``."""
    i -= 1
    while (buf[i] & 0xC0) == 0x80:
        i -= 1
    return i


@kernel(inline="always")
def _is_word_before(buf, start, i, bit, stage1, stage2):
    if i <= start:
        return False
    j = _previous(buf, i)
    cp, _ = _decode(buf, j)
    return ((_bits(cp, stage1, stage2) >> np.uint64(bit)) & np.uint64(1)) != 0


@kernel(inline="always")
def _assert(kind, buf, start, stop, pos, bit, stage1, stage2):
    if kind == A_BOL:
        return pos == start or buf[pos - 1] == 10
    if kind == A_EOL:
        return pos == stop or buf[pos] == 10
    if kind == A_BOS:
        return pos == start
    if kind == A_EOS:
        return pos == stop
    before = _is_word_before(buf, start, pos, bit, stage1, stage2)
    after = _in_class(buf, pos, stop, bit, stage1, stage2) > 0
    if kind == A_WORDB:
        return before != after
    return before == after


@kernel
def _scan(buf, start, ends, piece, pos, forbid, last_end, code, stage1, stage2, first, stack, memo, mode, out_spans,
          out_pieces, out_ends, at, limit):
    """The matcher, in one loop (no calls that take arrays: each would cost atomic reference counts).

    Searches the texts ``buf[start:ends[piece]]``, ``buf[ends[piece]:ends[piece + 1]]``... to the last
    of ``ends``, each on its own (anchors and lookahead stop at its ends), the first from ``pos``;
    ``mode`` 0 writes the matches ``[s, e)`` into ``out_spans[at:]`` as ``finditer`` iterates
    (``forbid``: the position where the next match may not be empty, or -1); mode 1 writes piece
    ends into ``out_ends[at:]`` as Oniguruma's iterator cuts; mode 2 writes the matches Oniguruma's
    iterator yields into ``out_spans[at:]`` (``last_end``: where the match before ``pos`` ended, or
    -1); in modes 0 and 2 the index of each match's text goes into ``out_pieces[at:]`` (unless that
    array is empty).
    Stops after ``limit`` entries; returns (new at, True if ``stack`` overflowed: nothing was written
    for the search that overflowed, final, the text it stopped in): ``final`` is the ``at`` before
    the first search that looked at the end of a text (reached its end), or -1 if none did: the
    entries before it are those of any longer text that starts the same way (see
    ``regex_final_piece_ends``). Failures remembered in ``memo`` stay valid for the later texts:
    they are intervals of the texts before, which no later position falls in."""
    final = np.int64(-1)
    overflow = False
    record = out_pieces.shape[0] > 0
    while piece < ends.shape[0]:
        stop = ends[piece]
        prev = pos
        last_match_end = last_end
        search_from = pos
        while search_from <= stop and at < limit:
            found = np.int64(-1)
            end = np.int64(-1)
            s = search_from
            touched = False
            while s <= stop:  # the leftmost start with a match
                if first >= 0:  # a match needs a first character in class ``first``
                    while s < stop and _in_class(buf, s, stop, first, stage1, stage2) == 0:
                        s += 1
                        while s < stop and (buf[s] & 0xC0) == 0x80:
                            s += 1
                    if s >= stop:
                        touched = True
                        break
                # -- run the program at s: end = the match end, or -1
                end = np.int64(-1)
                sp = 0
                pc = 0
                cur = s
                dead = False
                while True:
                    op = code[pc, 0]
                    if cur >= stop:
                        touched = True
                    ok = True
                    if op == CHAR:
                        ok = False
                        if cur < stop:
                            cp, width = _decode(buf, cur)
                            if cp == code[pc, 1]:
                                cur += width
                                pc += 1
                                ok = True
                    elif op == CLASS:
                        width = _in_class(buf, cur, stop, code[pc, 1], stage1, stage2)
                        if width > 0:
                            cur += width
                            pc += 1
                        else:
                            ok = False
                    elif op == RUN:
                        bit, low, high, kind, slot = code[pc, 1], code[pc, 2], code[pc, 3], code[pc, 4], code[pc, 5]
                        if slot >= 0 and memo[slot, 0] <= cur < memo[slot, 1]:
                            ok = False
                        elif kind == RUN_LAZY:
                            count = 0
                            p = cur
                            while count < low:
                                width = _in_class(buf, p, stop, bit, stage1, stage2)
                                if width == 0:
                                    break
                                p += width
                                count += 1
                            if p >= stop:
                                touched = True
                            if count < low:
                                ok = False
                                if slot >= 0:
                                    memo[slot, 0] = cur
                                    memo[slot, 1] = p
                            else:
                                if sp >= stack.shape[0]:
                                    overflow = True
                                    break
                                stack[sp, 0] = BT_LAZY
                                stack[sp, 1] = pc
                                stack[sp, 2] = p
                                stack[sp, 3] = count
                                stack[sp, 4] = cur
                                stack[sp, 5] = slot
                                sp += 1
                                cur = p
                                pc += 1
                        else:
                            count = 0
                            p = cur
                            at_min = cur if low == 0 else -1
                            while high < 0 or count < high:
                                width = _in_class(buf, p, stop, bit, stage1, stage2)
                                if width == 0:
                                    break
                                p += width
                                count += 1
                                if count == low:
                                    at_min = p
                            if p >= stop:
                                touched = True
                            if count < low:
                                ok = False
                                if slot >= 0:
                                    memo[slot, 0] = cur
                                    memo[slot, 1] = p
                            elif kind == RUN_GREEDY:
                                if sp >= stack.shape[0]:
                                    overflow = True
                                    break
                                stack[sp, 0] = BT_GREEDY
                                stack[sp, 1] = pc
                                stack[sp, 2] = p
                                stack[sp, 3] = at_min
                                stack[sp, 4] = cur
                                stack[sp, 5] = p
                                sp += 1
                                cur = p
                                pc += 1
                            else:
                                if slot >= 0:
                                    if sp >= stack.shape[0]:
                                        overflow = True
                                        break
                                    stack[sp, 0] = BT_POSSESSIVE
                                    stack[sp, 1] = pc
                                    stack[sp, 2] = p
                                    stack[sp, 3] = slot
                                    stack[sp, 4] = cur
                                    stack[sp, 5] = p
                                    sp += 1
                                cur = p
                                pc += 1
                    elif op == SPLIT:
                        if sp >= stack.shape[0]:
                            overflow = True
                            break
                        stack[sp, 0] = BT_PC
                        stack[sp, 1] = code[pc, 2]
                        stack[sp, 2] = cur
                        sp += 1
                        pc = code[pc, 1]
                    elif op == SPLIT_GUARD:
                        if _in_class(buf, cur, stop, code[pc, 3], stage1, stage2) > 0:
                            if sp >= stack.shape[0]:
                                overflow = True
                                break
                            stack[sp, 0] = BT_PC
                            stack[sp, 1] = code[pc, 2]
                            stack[sp, 2] = cur
                            sp += 1
                            pc = code[pc, 1]
                        else:
                            pc = code[pc, 2]
                    elif op == SPLIT_GUARD2:
                        take = False
                        if cur < stop:
                            cp, width = _decode(buf, cur)
                            bits = _bits(cp, stage1, stage2)
                            if (bits >> np.uint64(code[pc, 3])) & np.uint64(1):
                                take = True
                            elif (bits >> np.uint64(code[pc, 4])) & np.uint64(1):
                                if cur + width >= stop:
                                    touched = True
                                elif _in_class(buf, cur + width, stop, code[pc, 3], stage1, stage2) > 0:
                                    take = True
                        if take:
                            if sp >= stack.shape[0]:
                                overflow = True
                                break
                            stack[sp, 0] = BT_PC
                            stack[sp, 1] = code[pc, 2]
                            stack[sp, 2] = cur
                            sp += 1
                            pc = code[pc, 1]
                        else:
                            pc = code[pc, 2]
                    elif op == JMP:
                        pc = code[pc, 1]
                    elif op == ATOMIC:
                        if sp >= stack.shape[0]:
                            overflow = True
                            break
                        stack[sp, 0] = BT_ATOMIC
                        stack[sp, 1] = pc
                        stack[sp, 2] = cur
                        stack[sp, 3] = 0
                        stack[sp, 4] = 0
                        stack[sp, 5] = 0
                        sp += 1
                        pc += 1
                    elif op == ATOMIC_END:
                        while stack[sp - 1, 0] != BT_ATOMIC:
                            sp -= 1
                        sp -= 1
                        pc += 1
                    elif op == LOOK:
                        if sp >= stack.shape[0]:
                            overflow = True
                            break
                        stack[sp, 0] = BT_LOOK
                        stack[sp, 1] = pc
                        stack[sp, 2] = cur
                        stack[sp, 3] = 0
                        stack[sp, 4] = 0
                        stack[sp, 5] = 0
                        sp += 1
                        pc += 1
                    elif op == LOOK_END:
                        while stack[sp - 1, 0] != BT_LOOK:
                            sp -= 1
                        sp -= 1
                        look = stack[sp, 1]
                        if code[look, 1] != 0:  # negative: the body matched
                            ok = False
                        else:
                            cur = stack[sp, 2]
                            pc = code[look, 2]
                    elif op == ASSERT:
                        if _assert(code[pc, 1], buf, start, stop, cur, code[pc, 2], stage1, stage2):
                            pc += 1
                        else:
                            ok = False
                    else:  # MATCH
                        if not (cur == s and s == forbid):
                            end = cur
                            break
                        ok = False
                    if ok:
                        continue
                    # backtrack
                    resumed = False
                    while not resumed:
                        if sp == 0:
                            dead = True
                            break
                        sp -= 1
                        t = stack[sp, 0]
                        if t == BT_PC:
                            pc = stack[sp, 1]
                            cur = stack[sp, 2]
                            resumed = True
                        elif t == BT_GREEDY:
                            p = stack[sp, 2]
                            if p <= stack[sp, 3]:  # given back down to min: the run failed
                                slot = code[stack[sp, 1], 5]
                                if slot >= 0:
                                    memo[slot, 0] = stack[sp, 4]
                                    memo[slot, 1] = stack[sp, 5]
                                continue
                            p = _previous(buf, p)
                            follower = code[stack[sp, 1], 6]
                            if follower >= 0:  # what follows must start with a character of this class
                                while p > stack[sp, 3] and _in_class(buf, p, stop, follower, stage1, stage2) == 0:
                                    p = _previous(buf, p)
                                if _in_class(buf, p, stop, follower, stage1, stage2) == 0:  # nowhere: the run failed
                                    slot = code[stack[sp, 1], 5]
                                    if slot >= 0:
                                        memo[slot, 0] = stack[sp, 4]
                                        memo[slot, 1] = stack[sp, 5]
                                    continue
                            stack[sp, 2] = p
                            pc = stack[sp, 1] + 1
                            cur = p
                            sp += 1
                            resumed = True
                        elif t == BT_LAZY:
                            run_pc = stack[sp, 1]
                            p = stack[sp, 2]
                            count = stack[sp, 3]
                            high = code[run_pc, 3]
                            width = 0
                            if high < 0 or count < high:
                                width = _in_class(buf, p, stop, code[run_pc, 1], stage1, stage2)
                                if p >= stop:
                                    touched = True
                            if width == 0:
                                slot = stack[sp, 5]
                                if slot >= 0 and high < 0:
                                    memo[slot, 0] = stack[sp, 4]
                                    memo[slot, 1] = p
                                continue
                            stack[sp, 2] = p + width
                            stack[sp, 3] = count + 1
                            pc = run_pc + 1
                            cur = p + width
                            sp += 1
                            resumed = True
                        elif t == BT_POSSESSIVE:
                            slot = stack[sp, 3]
                            memo[slot, 0] = stack[sp, 4]
                            memo[slot, 1] = stack[sp, 5]
                        elif t == BT_LOOK:
                            look = stack[sp, 1]
                            if code[look, 1] != 0:  # negative lookahead whose body failed: go on
                                cur = stack[sp, 2]
                                pc = code[look, 2]
                                resumed = True
                        # BT_ATOMIC: keep popping
                    if dead:
                        break
                if overflow:
                    return at, True, final, piece
                if end >= 0:
                    found = s
                    break
                if s >= stop:
                    break
                s += 1
                while s < stop and (buf[s] & 0xC0) == 0x80:
                    s += 1
            if touched and final < 0:
                final = at
            if found < 0:
                break
            if mode == 0:
                out_spans[at, 0] = found
                out_spans[at, 1] = end
                if record:
                    out_pieces[at] = piece
                at += 1
                search_from = end
                forbid = end if end == found else np.int64(-1)
                continue
            if end == found and found == last_match_end:  # Oniguruma's iterator skips it, one character on
                if found >= stop:
                    break
                search_from = found + 1
                while search_from < stop and (buf[search_from] & 0xC0) == 0x80:
                    search_from += 1
                continue
            if mode == 2:
                out_spans[at, 0] = found
                out_spans[at, 1] = end
                if record:
                    out_pieces[at] = piece
                at += 1
                last_match_end = end
                search_from = end
                continue
            if found > prev:
                out_ends[at] = found
                at += 1
                prev = found
                if at >= limit:
                    return at, False, final, piece
            if end > found:
                out_ends[at] = end
                at += 1
                prev = end
            last_match_end = end
            search_from = end
        if mode == 1 and prev < stop and at < limit:
            out_ends[at] = stop
            at += 1
        piece += 1
        start = stop
        pos = stop
        forbid = np.int64(-1)
        last_end = np.int64(-1)
    return at, False, final, piece


@kernel
def new_scratch(program):
    """(stack, memo) for one text; memo intervals start empty."""
    memo = np.full((program.memo_slots, 2), -1, dtype=np.int64)
    return np.empty((64, 6), dtype=np.int64), memo


@kernel
def find_matches(buf, start, stop, program, out, oniguruma):
    """Write the ``[start, end)`` of every match in ``buf[start:stop]`` into ``out`` (int64 (k, 2), at least
    ``2 * (stop - start) + 2`` rows), as the ``regex`` module's ``finditer`` iterates (``oniguruma``:
    as Oniguruma's iterator does, empty matches included); returns k."""
    return find_piece_matches(buf, start, np.full(1, stop, dtype=np.int64), program, out, np.empty(0, np.int64),
                              oniguruma)


@kernel
def find_piece_matches(buf, start, ends, program, out, out_pieces, oniguruma):
    """``find_matches`` in each of the texts ``buf[start:ends[0]]``, ``buf[ends[0]:ends[1]]``... (each
    its own text) in one pass: their matches in order into ``out`` (``2 * (ends[-1] - start) + 2 *
    len(ends)`` rows suffice) and the index of each one's text into ``out_pieces`` (or an empty
    array: not written); returns how many."""
    stack, memo = new_scratch(program)
    dummy = np.empty(0, dtype=np.int64)
    mode = 2 if oniguruma else 0
    limit = np.int64(out.shape[0])
    count, overflow, _, piece = _scan(buf, start, ends, 0, start, np.int64(-1), np.int64(-1), program.code,
                                      program.stage1, program.stage2, program.first, stack, memo, mode, out,
                                      out_pieces, dummy, np.int64(0), limit)
    record = out_pieces.shape[0] > 0
    while overflow:  # go on after the last match of that text with a bigger stack
        stack = np.empty((4 * stack.shape[0], 6), dtype=np.int64)
        pos = start if piece == 0 else ends[piece - 1]
        forbid = last_end = np.int64(-1)
        if count > 0 and (not record or out_pieces[count - 1] == piece) and out[count - 1, 1] >= pos:
            pos = out[count - 1, 1]
            last_end = pos
            if out[count - 1, 0] == pos and not oniguruma:
                forbid = pos
        count, overflow, _, piece = _scan(buf, start if piece == 0 else ends[piece - 1], ends, piece, pos, forbid,
                                          last_end, program.code, program.stage1, program.stage2, program.first,
                                          stack, memo, mode, out, out_pieces, dummy, count, limit)
    return count


@kernel
def regex_pretokenize_ends(buf, start, stop, program, out_ends):
    """The piece ends of the text ``buf[start:stop]`` into ``out_ends`` (``stop - start`` entries suffice);
    returns their count. The kernel-level form of ``pretokenize_ends`` for any compiled regex."""
    return regex_piece_ends(buf, start, stop, start, program, out_ends, np.int64(0), np.int64(out_ends.shape[0]))


@kernel
def regex_piece_ends(buf, start, stop, pos, program, out_ends, at, limit):
    """Write the piece ends of ``buf[start:stop]`` (cut at every match start and end, the ``Split``
    pre-tokenizer with the ``Isolated`` behaviour; see the module docstring) from ``pos`` (``start`` or
    a piece end) into ``out_ends[at:]``, stopping after ``limit`` entries in all; returns the new
    ``at``. Called again from the last end written, it goes on exactly as one call would."""
    stack, memo = new_scratch(program)
    dummy = np.empty((0, 2), dtype=np.int64)
    none = np.empty(0, dtype=np.int64)
    ends = np.full(1, stop, dtype=np.int64)
    first_at = at
    at, overflow, _, _ = _scan(buf, start, ends, 0, pos, np.int64(-1), np.int64(-1), program.code, program.stage1,
                               program.stage2, program.first, stack, memo, 1, dummy, none, out_ends, at, limit)
    while overflow:  # go on from the last end written with a bigger stack
        stack = np.empty((4 * stack.shape[0], 6), dtype=np.int64)
        if at > first_at:
            pos = out_ends[at - 1]
        at, overflow, _, _ = _scan(buf, start, ends, 0, pos, np.int64(-1), np.int64(-1), program.code,
                                   program.stage1, program.stage2, program.first, stack, memo, 1, dummy, none,
                                   out_ends, at, limit)
    return at


@kernel
def regex_final_piece_ends(buf, stop, program, out_ends):
    """``(count, final)``: the piece ends of ``buf[:stop]`` into ``out_ends`` (``stop`` entries), and how many
    of them are final: every search that gave them read only characters before ``stop``, so a
    longer text that starts with ``buf[:stop]`` has the same first ``final`` piece ends (where a
    long document may be cut, for a program without the anchors that look behind a position)."""
    stack, memo = new_scratch(program)
    dummy = np.empty((0, 2), dtype=np.int64)
    none = np.empty(0, dtype=np.int64)
    ends = np.full(1, stop, dtype=np.int64)
    limit = np.int64(out_ends.shape[0])
    at, overflow, final, _ = _scan(buf, 0, ends, 0, 0, np.int64(-1), np.int64(-1), program.code, program.stage1,
                                   program.stage2, program.first, stack, memo, 1, dummy, none, out_ends, np.int64(0),
                                   limit)
    while overflow:
        stack = np.empty((4 * stack.shape[0], 6), dtype=np.int64)
        pos = out_ends[at - 1] if at > 0 else np.int64(0)
        at, overflow, more, _ = _scan(buf, 0, ends, 0, pos, np.int64(-1), np.int64(-1), program.code,
                                      program.stage1, program.stage2, program.first, stack, memo, 1, dummy, none,
                                      out_ends, at, limit)
        if final < 0:
            final = more
    return at, (at if final < 0 else final)
