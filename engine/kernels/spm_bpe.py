"""SentencePiece BPE merging (``encode_normalized``), on text ``engine.kernels.spm_normalize`` normalized.

Merging (SentencePiece's ``bpe::Model::Encode``): a sentence starts as its characters, a
user-defined symbol matched at a position being one frozen symbol; repeatedly, of all adjacent
pairs whose concatenation is a piece, the one of highest score (``priorities``: lower = higher
score; equal scores are equal priorities) merges, the leftmost on ties. Symbols are ids in a
pair table (``bpe_merge.build_pair_table``; merges by ``bpe_merge.merge_word``, not ordered, or
``merge_short_first`` over its first rows when no two pieces share a score):
piece ids, then virtual ids for characters that occur inside pieces without being pieces, then
``n_syms + code point`` for characters in no piece (they never merge). ``sym_out`` gives each
symbol's id (-1: unknown); an unknown symbol becomes its UTF-8 bytes' ``byte_ids`` with
``byte_fallback``, else ``unk_id``, a run of unknown symbols giving one ``unk_id``.

Sentences are cut into chunks that no symbol can span: between two characters that are adjacent
in no piece (normal or user-defined; ``ascii_join`` / ``join_table``). A merged symbol is a piece
and a frozen one a user-defined piece, so no symbol holds such a pair, merges never cross the cut
and every chunk merges alone to the symbols the whole sentence has there (the order of merges
inside a chunk is the sentence's order restricted to it). The one interaction across a cut, a run
of unknown symbols, is joined when the ids are written. Chunks of up to ``MAX_CACHED_BYTES`` bytes
are cached (``bpe_encode.new_piece_cache`` layout: rows ``(key, bytes at, ids at, count)``), the
cache outliving the call and emptied when full (bounded, linear).
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel
from engine.kernels.bpe_encode import find_piece, key_home, piece_key, same_span
from engine.kernels.bpe_merge import LONG_WORD, merge_short_first, merge_word
from engine.kernels.spm_normalize import char_len, decode_char, ud_match

__all__ = ["MAX_CACHED_BYTES", "build_join_table", "chunk_end", "encode_normalized", "self_merging_pieces"]

MAX_CACHED_BYTES = 96
_CACHE_KEY, _CACHE_BYTES, _CACHE_IDS, _CACHE_COUNT = 0, 1, 2, 3
_SHORT = 7  # bpe_encode.SHORT_PIECE: pieces up to this many bytes are their own key


@kernel
def build_join_table(lefts, rights):
    """An open-addressing set (int64 keys ``(left << 21) | right``, -1 free) of code point pairs."""
    size = 16
    while size < 2 * lefts.shape[0] + 2:
        size <<= 1
    table = np.full(size, -1, dtype=np.int64)
    mask = size - 1
    for k in range(lefts.shape[0]):
        key = (lefts[k] << 21) | rights[k]
        slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
        while table[slot] != key and table[slot] != -1:
            slot = (slot + 1) & mask
        table[slot] = key
    return table


@kernel(inline="always")
def _joined(table, a, b):
    key = (a << 21) | b
    mask = table.shape[0] - 1
    slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
    found = False
    while table[slot] != -1:
        if table[slot] == key:
            found = True
            break
        slot = (slot + 1) & mask
    return found


@kernel(leaf=True)
def chunk_end(buf, pos, stop, ascii_join, join_table):
    """End of the chunk starting at ``pos``: the first character boundary whose two characters are
    adjacent in no piece (``ascii_join`` for two ASCII characters, else ``join_table``), or ``stop``."""
    prev = np.int64(buf[pos])
    n = char_len(buf[pos])
    if n > 1:
        prev = decode_char(buf, pos, min(n, stop - pos))
    j = pos + n
    while j < stop:
        b = buf[j]
        if b < 0x80 and prev < 0x80:
            if not ascii_join[prev, np.int64(b)]:
                return j
            prev = np.int64(b)
            j += 1
            continue
        n = min(char_len(b), stop - j)
        cp = decode_char(buf, j, n)
        if not _joined(join_table, prev, cp):
            return j
        prev = cp
        j += n
    return stop


@kernel(leaf=True)
def _emit_symbol(s, n_syms, sym_out, sym_cp, byte_ids, unk_id, byte_fallback, out, at, start):
    """Write the id(s) of symbol ``s`` at ``out[at:]`` (``start``: where the chunk's ids begin, for
    the run rule of unknown symbols); returns the new position."""
    if s < n_syms and sym_out[s] >= 0:
        out[at] = sym_out[s]
        return at + 1
    cp = sym_cp[s] if s < n_syms else s - n_syms
    if not byte_fallback:
        if at > start and out[at - 1] == unk_id:
            return at
        out[at] = unk_id
        return at + 1
    if cp < 0x80:
        out[at] = byte_ids[cp]
        return at + 1
    if cp < 0x800:
        out[at] = byte_ids[0xC0 | (cp >> 6)]
        out[at + 1] = byte_ids[0x80 | (cp & 0x3F)]
        return at + 2
    if cp < 0x10000:
        out[at] = byte_ids[0xE0 | (cp >> 12)]
        out[at + 1] = byte_ids[0x80 | ((cp >> 6) & 0x3F)]
        out[at + 2] = byte_ids[0x80 | (cp & 0x3F)]
        return at + 3
    out[at] = byte_ids[0xF0 | (cp >> 18)]
    out[at + 1] = byte_ids[0x80 | ((cp >> 12) & 0x3F)]
    out[at + 2] = byte_ids[0x80 | ((cp >> 6) & 0x3F)]
    out[at + 3] = byte_ids[0x80 | (cp & 0x3F)]
    return at + 4


@kernel(leaf=True)
def _merge_chunk(buf, pos, end, char_table, n_syms, ud_table, ud_values, has_ud, pairs, nexts, lefts, rights, made,
                 priorities, first, unique, sym_out, sym_cp, byte_ids, unk_id, byte_fallback, parts, part_priority, out,
                 at):
    """Segment, merge and write the chunk ``buf[pos:end]`` at ``out[at:]`` (``parts``: scratch of
    ``end - pos`` entries at least); returns the new position. ``unique``: no two pieces share a
    score, so a pair's ``first`` row (``bpe_merge.first_entry_table``) orders pairs as the scores
    do and equal values are one piece (``merge_short_first`` keeps the leftmost)."""
    m = 0
    i = pos
    limit = char_table.shape[0]
    while i < end:
        if has_ud:
            length, sym = ud_match(ud_table, ud_values, buf, i, end)
            if length > 0:
                parts[m] = sym
                m += 1
                i += length
                continue
        n = min(char_len(buf[i]), end - i)
        cp = decode_char(buf, i, n)
        s = char_table[cp] if cp < limit else -1
        parts[m] = s if s >= 0 else n_syms + cp
        m += 1
        i += n
    if unique and m <= LONG_WORD:
        m = merge_short_first(parts, m, first, part_priority)
    else:
        m = merge_word(parts, m, LONG_WORD, False, pairs, nexts, lefts, rights, made, priorities, part_priority)
    start = at
    for k in range(m):
        s = parts[k]
        if s < n_syms and sym_out[s] >= 0:
            out[at] = sym_out[s]
            at += 1
        else:
            at = _emit_symbol(s, n_syms, sym_out, sym_cp, byte_ids, unk_id, byte_fallback, out, at, start)
    return at


@kernel(leaf=True)
def encode_normalized(buf, document_offsets, char_table, n_syms, ud_table, ud_values, has_ud, pairs, nexts, lefts,
                      rights, made, priorities, first, unique, piece_table, piece_pool, piece_offsets, sym_out, sym_cp,
                      byte_ids, unk_id, byte_fallback, ascii_join, join_table, join2, ascii_ids, cache, cache_bytes,
                      cache_ids, cache_state, bos, eos, wrap, parts, part_priority, out, out_offsets):
    """Ids of every normalized document of ``buf`` into ``out`` (uint32; ``len(buf) + 2 * documents``
    entries); with ``wrap`` each is ``[bos, ids..., eos]`` (``bos`` < 0: none). Returns the ids written.

    ``ascii_ids[b]``: the id of ASCII character ``b`` as a symbol alone (-1: unknown); ``join2``:
    ``ascii_join`` with ``▁`` (U+2581) as character 128, so most chunks end without ``chunk_end``. A chunk that
    is found in the cache; else it is a piece whose own characters merge into it (``piece_table``,
    ``bpe_encode.build_piece_table`` over ``self_merging_pieces``: no merging), or it is merged; and
    either way cached. ``parts`` (int64, ``max(len(buf), MAX_CACHED_BYTES)`` entries) and ``part_priority``
    (int64, ``LONG_WORD``): the merges' scratch, from the caller (the kernel allocates nothing: a
    ``leaf`` kernel, without reference counts)."""
    cache_size = cache.shape[0]
    cache_mask = cache_size - 1
    at = np.int64(0)
    for d in range(document_offsets.shape[0] - 1):
        out_offsets[d] = at
        if wrap and bos >= 0:
            out[at] = bos
            at += 1
        content = at
        pos = document_offsets[d]
        stop = document_offsets[d + 1]
        while pos < stop:
            b = np.int64(buf[pos])
            if b < 0x80 and ascii_ids[b] >= 0 and (pos + 1 >= stop or (
                    buf[pos + 1] < 0x80 and not ascii_join[b, np.int64(buf[pos + 1])])):
                out[at] = ascii_ids[b]  # a known ASCII character that is a chunk alone
                at += 1
                pos += 1
                continue
            # the chunk's end: ASCII characters and ▁ through join2, anything else by chunk_end
            end = -1
            prev = -1
            j = pos
            if b < 0x80:
                prev = b
                j = pos + 1
            elif b == 0xE2 and pos + 2 < stop and buf[pos + 1] == 0x96 and buf[pos + 2] == 0x81:
                prev = 128
                j = pos + 3
            if prev >= 0:
                while j < stop:
                    c = np.int64(buf[j])
                    if c < 0x80:
                        if not join2[prev, c]:
                            end = j
                            break
                        prev = c
                        j += 1
                    elif c == 0xE2 and j + 2 < stop and buf[j + 1] == 0x96 and buf[j + 2] == 0x81:
                        if not join2[prev, 128]:
                            end = j
                            break
                        prev = 128
                        j += 3
                    else:
                        break
                if j >= stop:
                    end = stop
            if end < 0:
                end = chunk_end(buf, pos, stop, ascii_join, join_table)
            length = end - pos
            chunk_at = at
            if length == char_len(b):  # one character: its symbol, no merge
                cp = decode_char(buf, pos, length)
                s = char_table[cp] if cp < char_table.shape[0] else -1
                at = _emit_symbol(s if s >= 0 else n_syms + cp, n_syms, sym_out, sym_cp, byte_ids, unk_id,
                                  byte_fallback, out, at, at)
            elif length <= MAX_CACHED_BYTES:
                key = piece_key(buf, pos, length)
                slot = key_home(key, cache_mask)
                while cache[slot, _CACHE_KEY] != 0:
                    if cache[slot, _CACHE_KEY] == key and (length <= _SHORT or same_span(
                            cache_bytes, np.int64(cache[slot, _CACHE_BYTES]), buf, pos, length)):
                        break
                    slot = (slot + 1) & cache_mask
                if cache[slot, _CACHE_KEY] != 0:
                    ids_at = np.int64(cache[slot, _CACHE_IDS])
                    for j in range(np.int64(cache[slot, _CACHE_COUNT])):
                        out[at] = cache_ids[ids_at + j]
                        at += 1
                else:
                    t = -1
                    if length > 1:
                        t = find_piece(buf, pos, length, key, piece_table, piece_pool, piece_offsets)
                    if t >= 0:
                        out[at] = t
                        at += 1
                    else:
                        at = _merge_chunk(buf, pos, end, char_table, n_syms, ud_table, ud_values, has_ud, pairs,
                                          nexts, lefts, rights, made, priorities, first, unique, sym_out, sym_cp,
                                          byte_ids, unk_id, byte_fallback, parts, part_priority, out, at)
                    count = at - chunk_at
                    stored = length if length > _SHORT else 0
                    if (cache_state[0] >= (cache_size * 3) // 4 or cache_state[1] + stored > cache_bytes.shape[0]
                            or cache_state[2] + count > cache_ids.shape[0]):
                        for j in range(cache_size):
                            cache[j, _CACHE_KEY] = 0
                        cache_state[0] = 0
                        cache_state[1] = 0
                        cache_state[2] = 0
                        slot = key_home(key, cache_mask)
                    at_bytes = cache_state[1]
                    at_ids = cache_state[2]
                    cache[slot, _CACHE_KEY] = key
                    cache[slot, _CACHE_BYTES] = at_bytes
                    cache[slot, _CACHE_IDS] = at_ids
                    cache[slot, _CACHE_COUNT] = count
                    for j in range(stored):
                        cache_bytes[at_bytes + j] = buf[pos + j]
                    for j in range(count):
                        cache_ids[at_ids + j] = out[chunk_at + j]
                    cache_state[0] += 1
                    cache_state[1] = at_bytes + stored
                    cache_state[2] = at_ids + count
            else:
                at = _merge_chunk(buf, pos, end, char_table, n_syms, ud_table, ud_values, has_ud, pairs, nexts,
                                  lefts, rights, made, priorities, first, unique, sym_out, sym_cp, byte_ids, unk_id,
                                  byte_fallback, parts, part_priority, out, at)
            # a run of unknown symbols across two chunks is one unknown id
            if (not byte_fallback and at > chunk_at and chunk_at > content and out[chunk_at] == unk_id
                    and out[chunk_at - 1] == unk_id):
                for j in range(chunk_at, at - 1):
                    out[j] = out[j + 1]
                at -= 1
            pos = end
        if wrap:
            out[at] = eos
            at += 1
    out_offsets[document_offsets.shape[0] - 1] = at
    return at


@kernel
def self_merging_pieces(pool, offsets, candidates, char_table, n_syms, ud_table, ud_values, has_ud, pairs, nexts, lefts,
                        rights, made, priorities, first, unique, sym_out, sym_cp, byte_ids, unk_id, byte_fallback):
    """bool per piece ``t`` (bytes ``pool[offsets[t]:offsets[t+1]]``, ``candidates[t]``): a chunk of
    exactly those bytes encodes as the one id ``t``."""
    n = offsets.shape[0] - 1
    wanted = np.zeros(n, dtype=np.bool_)
    parts = np.empty(MAX_CACHED_BYTES, dtype=np.int64)
    part_priority = np.empty(LONG_WORD, dtype=np.int64)
    out = np.empty(4 * MAX_CACHED_BYTES + 8, dtype=np.uint32)
    for t in range(n):
        length = offsets[t + 1] - offsets[t]
        if not candidates[t] or length < 2 or length > MAX_CACHED_BYTES:
            continue
        at = _merge_chunk(pool, offsets[t], offsets[t + 1], char_table, n_syms, ud_table, ud_values, has_ud,
                                 pairs, nexts, lefts, rights, made, priorities, first, unique, sym_out, sym_cp, byte_ids,
                                 unk_id, byte_fallback, parts, part_priority, out, np.int64(0))
        wanted[t] = at == 1 and out[0] == t
    return wanted
