"""The BPE model of a Hugging Face ``tokenizer.json`` over pieces given by their ends.

Two encoders, both merging a piece's symbols by the byte-level rule of ``bpe_merge`` (each pair has
one rank; repeatedly the adjacent pair of lowest rank, leftmost on ties, which is what Hugging Face's
``Word::merge_all`` does):

- ``encode_byte_pieces``: symbols are bytes (a vocabulary in GPT-2's byte alphabet); the piece
  lookups, the piece cache that outlives the call and the merges are those of
  ``bpe_encode.encode_bytes``, with the pieces cut beforehand instead of by a pattern scanner.
- ``encode_char_pieces``: symbols are characters (code points, uint32). A character maps to the
  id of its one-character token (``char_ids``, -1 when there is none); with ``byte_fallback``, a
  character without one becomes the ``<0xXX>`` tokens of its UTF-8 bytes (``fallback_ids``) when
  all of them exist; else it becomes ``unk_id`` (consecutive unknowns fuse into one with
  ``fuse_unk``), or nothing when there is no unknown token (``unk_id`` = -1). A pending unknown is
  written before the next character that has a token, as Hugging Face writes it (so byte fallback
  tokens may come before an earlier unknown). With ``whole`` (``ignore_merges``), a piece that is
  itself a token (``whole_slots`` over ``whole_pool``) is that token. Pieces of up to ``LONG_WORD``
  symbols are merged once and their ids kept in a bounded cache keyed by their code points that
  outlives the call (``new_char_cache``); longer ones are merged by ``bpe_merge.merge_long_pieces``.
  At every ``PREFETCH_BLOCK`` pieces, the cache keys of the next block are computed and their rows
  prefetched at once.

``cut_pieces`` cuts a piece between two characters that both have a token when no token of the
vocabulary holds them side by side (``build_pair_set``): a symbol that covered both would be a token
holding them side by side, so no merge crosses the cut, and both sides merge as they would in the
whole piece (pairs of the two sides never meet). Long pieces (a whole text, as Llama 2's files
give them) become word-sized ones that the cache serves. Not used under ``ignore_merges``, whose
whole-piece lookup needs the piece whole. Two characters that are ASCII or ``METASPACE_CP`` (U+2581,
SentencePiece's space) are answered by a 130 x 130 table (``ascii_cuts``), the others by the pair set.

``encode_byte_pieces`` returns ``(ids written, long pieces, count)``, ``encode_char_pieces`` (a
``leaf`` kernel, its scratch from ``char_scratch``) ``(ids written, count)`` with the long pieces in
its scratch; the caller finishes long pieces with ``merge_long_pieces``. ``out`` needs ``4 * symbols
+ 1`` entries (byte fallback writes up to four ids per character).
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel
from engine.kernels.bpe_encode import (LONG_WORD, MAX_CACHED_PIECE, PIECE_BLOCK, encode_piece_block, find_span, key_home,
                                       long_capacity)
from engine.kernels.bpe_merge import hash_span, merge_short_first, same_span
from engine.kernels.prefetch import prefetch

PREFETCH_BLOCK = 32
METASPACE_CP = 0x2581  # ▁: the one non-ASCII code point ascii_cuts answers from its table

__all__ = ["encode_byte_pieces", "encode_char_pieces", "char_scratch", "new_char_cache", "build_span_table", "utf8_of",
           "build_pair_set", "ascii_cuts", "cut_pieces", "METASPACE_CP"]


@kernel
def encode_byte_pieces(buf, ends, byte_ids, first, token_table, token_pool, token_offsets, cache, cache_bytes,
                       cache_ids, cache_state, out):
    """Byte-level BPE of the pieces of ``buf`` ending at ``ends`` (see ``bpe_encode.encode_bytes``)."""
    parts, part_priority = np.empty(LONG_WORD, np.int64), np.empty(LONG_WORD, np.int64)
    long_pieces = np.empty((long_capacity(buf.shape[0]), 2), dtype=np.int64)
    long_count = np.int64(0)
    out_pos = np.int64(0)
    pos = np.int64(0)
    keys = np.empty(PIECE_BLOCK, dtype=np.uint64)
    for block in range(0, ends.shape[0], PIECE_BLOCK):
        pos, out_pos, long_count = encode_piece_block(
            buf, pos, ends, block, min(block + PIECE_BLOCK, ends.shape[0]), keys, byte_ids, first, parts,
            part_priority, token_table, token_pool, token_offsets, cache, cache_bytes, cache_ids, cache_state, out,
            out_pos, long_pieces, long_count)
    return out_pos, long_pieces, long_count


@kernel
def build_span_table(pool, offsets):
    """Open-addressing table (int64, -1 free, at most half full) of the spans ``pool[offsets[t]:offsets[t+1]]``
    by ``hash_span``; ``bpe_encode.find_span`` looks a span up in it."""
    n = offsets.shape[0] - 1
    size = 16
    while size < 2 * n + 2:
        size <<= 1
    slots = np.full(size, -1, dtype=np.int64)
    for t in range(n):
        h = hash_span(pool, offsets[t], offsets[t + 1])
        found, slot = find_span(pool, offsets[t], offsets[t + 1], h, pool, offsets, slots)
        if found < 0:
            slots[slot] = t
    return slots


@kernel(inline="always")
def utf8_of(c, into):
    """Write the UTF-8 bytes of code point ``c`` into ``into``; returns how many."""
    if c < 0x80:
        into[0] = c
        return 1
    if c < 0x800:
        into[0] = 0xC0 | (c >> 6)
        into[1] = 0x80 | (c & 0x3F)
        return 2
    if c < 0x10000:
        into[0] = 0xE0 | (c >> 12)
        into[1] = 0x80 | ((c >> 6) & 0x3F)
        into[2] = 0x80 | (c & 0x3F)
        return 3
    into[0] = 0xF0 | (c >> 18)
    into[1] = 0x80 | ((c >> 12) & 0x3F)
    into[2] = 0x80 | ((c >> 6) & 0x3F)
    into[3] = 0x80 | (c & 0x3F)
    return 4


def new_char_cache(slots: int = 1 << 17, symbol_capacity: int = 1 << 20, id_capacity: int = 1 << 18) -> tuple:
    """An empty cache of merged pieces for ``encode_char_pieces``: ``(table, code point pool, id pool,
    state)``; rows ``(key, start of its code points, start of its ids, number of ids)``, key 0 free;
    ``state``: rows, code points and ids in use. It outlives calls (one per thread, as the byte-level
    cache) and empties itself when three quarters full or a pool has no room: bounded, and linear."""
    return (np.zeros((slots, 4), dtype=np.uint64), np.empty(symbol_capacity, dtype=np.uint32),
            np.empty(id_capacity, dtype=np.uint32), np.zeros(3, dtype=np.int64))


def char_scratch(out_length: int) -> tuple:
    """The scratch ``encode_char_pieces`` takes for an ``out`` of ``out_length`` entries: ``(parts,
    part_priority, utf8, keys, long_pieces)``; a long piece writes more than ``MAX_CACHED_PIECE``
    ids there, so ``long_capacity(out_length)`` rows hold them all."""
    return (np.empty(LONG_WORD, np.int64), np.empty(LONG_WORD, np.int64), np.empty(4, np.int64),
            np.empty(PREFETCH_BLOCK, np.uint64), np.empty((long_capacity(out_length), 2), dtype=np.int64))


@kernel(leaf=True)
def encode_char_pieces(cps, ends, char_ids, fallback_ids, byte_fallback, unk_id, fuse_unk, whole, whole_pool,
                       whole_offsets, whole_slots, whole_ids, first, cache, cache_cps, cache_ids, cache_state, parts,
                       part_priority, utf8, keys, long_pieces, out):
    """Character-level BPE of the pieces of ``cps`` ending at ``ends`` (see the module docstring);
    ``cache...``: a ``new_char_cache``; ``parts`` ... ``long_pieces``: a ``char_scratch(len(out))``
    (the kernel creates no array: a ``leaf``, without reference counts). Returns ``(ids written,
    long pieces)``, their rows ``(start, ids)`` in ``long_pieces``."""
    count = ends.shape[0]
    cache_size = cache.shape[0]
    cache_mask = cache_size - 1
    long_count = np.int64(0)
    limit = char_ids.shape[0]
    out_pos = np.int64(0)
    pos = np.int64(0)
    for k in range(count):
        if k % PREFETCH_BLOCK == 0:  # the cache keys of the next block of pieces, their rows prefetched
            start = ends[k - 1] if k > 0 else np.int64(0)
            for j in range(min(PREFETCH_BLOCK, count - k)):
                stop = ends[k + j]
                # the pieces that may read their key: cacheable, and not one character with a token
                if stop - start <= MAX_CACHED_PIECE and (stop - start > 1 or cps[start] >= limit
                                                         or char_ids[cps[start]] < 0):
                    key = (hash_span(cps, start, stop) >> np.uint64(8)) | (np.uint64(stop - start) << np.uint64(56))
                    keys[j] = key
                    prefetch(cache, (key_home(key, cache_mask), 0), False)
                start = stop
        end = ends[k]
        length = end - pos
        if length == 1:  # one character with a token: that token, no lookup
            c = np.int64(cps[pos])
            t = char_ids[c] if c < limit else -1
            if t >= 0:
                out[out_pos] = t
                out_pos += 1
                pos = end
                continue
        if whole:
            found, _ = find_span(cps, pos, end, hash_span(cps, pos, end), whole_pool, whole_offsets, whole_slots)
            if found >= 0:
                out[out_pos] = whole_ids[found]
                out_pos += 1
                pos = end
                continue
        cacheable = length <= MAX_CACHED_PIECE
        key = np.uint64(0)
        slot = 0
        if cacheable:
            key = keys[k % PREFETCH_BLOCK]
            slot = key_home(key, cache_mask)
            while cache[slot, 0] != 0:
                if cache[slot, 0] == key and same_span(cache_cps, np.int64(cache[slot, 1]), cps, pos, length):
                    break
                slot = (slot + 1) & cache_mask
            if cache[slot, 0] != 0:
                at = np.int64(cache[slot, 2])
                n_ids = np.int64(cache[slot, 3])
                for j in range(n_ids):
                    out[out_pos + j] = cache_ids[at + j]
                out_pos += n_ids
                pos = end
                continue
        start = out_pos
        pending = -1  # an unknown not written yet
        for i in range(pos, end):
            c = np.int64(cps[i])
            t = char_ids[c] if c < limit else -1
            if t >= 0:
                if pending >= 0:
                    out[out_pos] = pending
                    out_pos += 1
                    pending = -1
                out[out_pos] = t
                out_pos += 1
                continue
            if byte_fallback:
                width = utf8_of(c, utf8)
                ok = True
                for b in range(width):
                    if fallback_ids[utf8[b]] < 0:
                        ok = False
                if ok:
                    for b in range(width):
                        out[out_pos] = fallback_ids[utf8[b]]
                        out_pos += 1
                    continue
            if unk_id >= 0:
                if pending >= 0 and not fuse_unk:
                    out[out_pos] = pending
                    out_pos += 1
                pending = unk_id
        if pending >= 0:
            out[out_pos] = pending
            out_pos += 1
        m = out_pos - start
        if m > 1:
            if m > MAX_CACHED_PIECE:
                long_pieces[long_count, 0] = start
                long_pieces[long_count, 1] = m
                long_count += 1
                cacheable = False
            else:
                for i in range(m):
                    parts[i] = out[start + i]
                m = merge_short_first(parts, m, first, part_priority)
                for i in range(m):
                    out[start + i] = parts[i]
                out_pos = start + m
        if cacheable:
            n_ids = out_pos - start
            if (cache_state[0] >= (cache_size * 3) // 4 or cache_state[1] + length > cache_cps.shape[0]
                    or cache_state[2] + n_ids > cache_ids.shape[0]):  # evict everything: bounded and linear
                for j in range(cache_size):
                    cache[j, 0] = 0
                cache_state[0] = 0
                cache_state[1] = 0
                cache_state[2] = 0
                slot = key_home(key, cache_mask)
            at_cps, at_ids = cache_state[1], cache_state[2]
            cache[slot, 0] = key
            cache[slot, 1] = at_cps
            cache[slot, 2] = at_ids
            cache[slot, 3] = n_ids
            for j in range(length):
                cache_cps[at_cps + j] = cps[pos + j]
            for j in range(n_ids):
                cache_ids[at_ids + j] = out[start + j]
            cache_state[0] += 1
            cache_state[1] = at_cps + length
            cache_state[2] = at_ids + n_ids
        pos = end
    return out_pos, long_count


@kernel(inline="always")
def _pair_key(a, b):
    return (np.uint64(a) << np.uint64(21)) | np.uint64(b) | (np.uint64(1) << np.uint64(63))  # never 0


@kernel
def build_pair_set(pool, offsets):
    """Open-addressing set (uint64, 0 free, at most half full) of every pair of adjacent code points
    inside the tokens ``pool[offsets[t]:offsets[t+1]]``."""
    pairs = 0
    for t in range(offsets.shape[0] - 1):
        pairs += max(offsets[t + 1] - offsets[t] - 1, 0)
    size = 16
    while size < 2 * pairs + 2:
        size <<= 1
    slots = np.zeros(size, dtype=np.uint64)
    mask = size - 1
    for t in range(offsets.shape[0] - 1):
        for i in range(offsets[t], offsets[t + 1] - 1):
            key = _pair_key(pool[i], pool[i + 1])
            slot = key_home(key, mask)
            while slots[slot] != 0 and slots[slot] != key:
                slot = (slot + 1) & mask
            slots[slot] = key
    return slots


@kernel(inline="always")
def _cut_between(a, b, char_ids, pair_set):
    """Whether a piece may be cut between code points ``a`` and ``b``: both have a token and no token holds them
    side by side."""
    limit = char_ids.shape[0]
    if a >= limit or b >= limit or char_ids[a] < 0 or char_ids[b] < 0:
        return False
    key = _pair_key(a, b)
    mask = pair_set.shape[0] - 1
    slot = key_home(key, mask)
    while pair_set[slot] != 0 and pair_set[slot] != key:
        slot = (slot + 1) & mask
    return pair_set[slot] == 0


@kernel(inline="always")
def _dense(c):
    """Row of code point ``c`` in an ``ascii_cuts`` table: itself for ASCII, 128 for ``METASPACE_CP``, else 129."""
    if c < 128:
        return c
    return 128 if c == METASPACE_CP else 129


@kernel
def ascii_cuts(char_ids, pair_set):
    """``cut[a, b]`` (uint8, 130 x 130) = ``_cut_between(a, b)`` for two code points that are ASCII
    or ``METASPACE_CP`` (row and column 128; SentencePiece's U+2581 in Llama 2's and Mistral's files, a
    space's stand-in, so as common as a space): ``cut_pieces`` answers those pairs with one load from
    this table, no hashing. Row and column 129 stand for any other code point and are never read."""
    cut = np.zeros((130, 130), dtype=np.uint8)
    for a in range(129):
        for b in range(129):
            cut[a, b] = _cut_between(np.int64(a if a < 128 else METASPACE_CP), np.int64(b if b < 128 else METASPACE_CP),
                                     char_ids, pair_set)
    return cut


@kernel(leaf=True)
def cut_pieces(cps, ends, char_ids, pair_set, cut, out):
    """Write the ends of the pieces ``ends`` cut wherever no merge can cross (see the module docstring)
    into ``out`` (int64, ``len(cps) + 1`` entries); returns how many. ``cut``: ``ascii_cuts(char_ids,
    pair_set)``. Two characters that are ASCII or ``METASPACE_CP`` are looked up in it and their end
    written whether or not it is kept (the count moves only for a cut: no branch to mispredict)."""
    count = 0
    start = np.int64(0)
    for p in range(ends.shape[0]):
        end = ends[p]
        if start < end:
            a = np.int64(cps[start])
            da = _dense(a)
            for i in range(start + 1, end):
                b = np.int64(cps[i])
                db = _dense(b)
                if max(da, db) < 129:
                    out[count] = i
                    count += np.int64(cut[da, db])
                elif _cut_between(a, b, char_ids, pair_set):
                    out[count] = i
                    count += 1
                a, da = b, db
        out[count] = end
        count += 1
        start = end
    return count
