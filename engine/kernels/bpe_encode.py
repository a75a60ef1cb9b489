"""BPE encoders: byte-level (``encode_bytes``) and character-level (``encode_word_documents``).

Words are merged by ``engine.kernels.bpe_merge.merge_word`` (the merge table, both rules and
the long-word path are described there).

Drivers:

- ``encode_bytes`` (byte level): cuts pieces a block at a time (``scan_document``: for the named
  patterns ASCII pieces in a loop without calls, the rest by the full scanners; for a compiled
  regex the matcher of ``regex_vm``), then for each piece: one byte is its byte
  token; else its 64-bit ``piece_key`` (the bytes themselves up to 7 bytes, else a hash and a
  byte compare) finds it in the token table (``build_piece_table``: the tokens whose own bytes
  merge into them, ``self_merging_tokens``; every token for tiktoken files), else in a bounded
  cache of merged pieces that outlives the call (``new_piece_cache``, one per thread), else it is
  merged and cached. Linear in the input.
- ``encode_word_documents`` (character level): splits the word regex, merges each word on its
  first occurrence in the call (bounded cache) and copies its ids afterwards, in one call.
- ``encode_words`` / ``scatter_documents``: merge a table of distinct words once, then expand
  them per occurrence (the word tokenizer's scatter, and the long-word tests).
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel
from engine.kernels.bpe_merge import (EMPTY_KEY, FNV_OFFSET, GOLDEN, LONG_WORD, build_pair_table, hash_span, key_slot,
                                      merge_short, merge_short_first, merge_word, record_long, same_span)
from engine.kernels.prefetch import prefetch
from engine.kernels.pretokenize import scan_document
from engine.kernels.wordsplit import word_end

__all__ = [
    "EMPTY_KEY", "LONG_WORD", "MAX_CACHED_PIECE", "hash_span", "same_span", "key_slot", "find_span", "build_pair_table",
    "merge_word", "encode_words", "scatter_documents", "map_symbols", "piece_key", "build_piece_table",
    "self_merging_tokens", "new_piece_cache", "encode_bytes", "encode_scratch", "long_capacity", "encode_piece_block",
    "encode_word_documents",
]

# Pieces of up to this many symbols are merged in the encoders' pass and cached; longer ones are
# written unmerged and merged at each occurrence by bpe_merge.merge_long_pieces.
MAX_CACHED_PIECE = LONG_WORD
# Pieces of up to this many bytes are their own key (see piece_key).
SHORT_PIECE = 7
# Pieces cut ahead per scan in encode_bytes (their ends stay in the L1/L2 cache).
PIECE_BLOCK = 1024


@kernel
def map_symbols(cps, char_table):
    """Symbol of each code point via ``char_table`` (int64, -1 = unknown); returns (symbols, first unknown or -1)."""
    out = np.empty(cps.shape[0], dtype=np.int64)
    first_unknown = -1
    limit = char_table.shape[0]
    for i in range(cps.shape[0]):
        c = cps[i]
        s = char_table[c] if c < limit else -1
        if s < 0 and first_unknown < 0:
            first_unknown = i
        out[i] = s
    return out, first_unknown


@kernel
def encode_words(word_syms, word_offsets, pairs, nexts, lefts, rights, made, priorities, long_word=LONG_WORD):
    """Merge every word in merge order (the ``ordered`` rule); returns (pieces int64 flat, piece offsets int64[d+1])."""
    n_words = word_offsets.shape[0] - 1
    out = np.empty(word_syms.shape[0], dtype=np.int64)
    out_offsets = np.empty(n_words + 1, dtype=np.int64)
    out_offsets[0] = 0
    longest = 0
    for w in range(n_words):
        longest = max(longest, word_offsets[w + 1] - word_offsets[w])
    work = np.empty(longest, dtype=np.int64)
    part_priority = np.empty(min(longest, long_word) + 1, dtype=np.int64)
    used = 0
    for w in range(n_words):
        n = word_offsets[w + 1] - word_offsets[w]
        for i in range(n):
            work[i] = word_syms[word_offsets[w] + i]
        n = merge_word(work, n, long_word, True, pairs, nexts, lefts, rights, made, priorities,
                       part_priority)
        for i in range(n):
            out[used + i] = work[i]
        used += n
        out_offsets[w + 1] = used
    return out[:used], out_offsets


@kernel
def scatter_documents(word_of_piece, doc_piece_bounds, word_ids, word_id_offsets, bos, eos, wrap):
    """Ids of every document: each piece occurrence expands to its word's ids.

    ``doc_piece_bounds`` int64[D+1] are piece index ranges per document; with ``wrap`` each
    document is ``[bos, ..., eos]``. Returns (values uint32, offsets int64[D+1]).
    """
    n_docs = doc_piece_bounds.shape[0] - 1
    offsets = np.empty(n_docs + 1, dtype=np.int64)
    offsets[0] = 0
    extra = 2 if wrap else 0
    for d in range(n_docs):
        size = extra
        for p in range(doc_piece_bounds[d], doc_piece_bounds[d + 1]):
            w = word_of_piece[p]
            size += word_id_offsets[w + 1] - word_id_offsets[w]
        offsets[d + 1] = offsets[d] + size
    values = np.empty(offsets[n_docs], dtype=np.uint32)
    for d in range(n_docs):
        at = offsets[d]
        if wrap:
            values[at] = bos
            at += 1
        for p in range(doc_piece_bounds[d], doc_piece_bounds[d + 1]):
            w = word_of_piece[p]
            for k in range(word_id_offsets[w], word_id_offsets[w + 1]):
                values[at] = word_ids[k]
                at += 1
        if wrap:
            values[at] = eos
    return values, offsets


@kernel
def find_span(buf, start, end, h, pool, offsets, slots):
    """``(t, slot)``: the entry ``t`` of ``slots`` whose span ``pool[offsets[t]:offsets[t+1]]``
    equals ``buf[start:end]`` (hash ``h``), or ``(-1, the free slot where it would go)``."""
    mask = slots.shape[0] - 1
    slot = np.int64(h & np.uint64(mask))
    length = end - start
    while slots[slot] >= 0:
        t = slots[slot]
        if offsets[t + 1] - offsets[t] == length and same_span(pool, offsets[t], buf, start, length):
            return t, slot
        slot = (slot + 1) & mask
    return -1, slot


@kernel(inline="always")
def _word_at(buf, i, count):
    """``count`` (at most 8) bytes from ``buf[i]`` as a little-endian uint64; eight fixed loads when they
    all lie inside ``buf`` (no branches on the count), else a loop."""
    if i + 8 <= buf.shape[0]:
        word = (np.uint64(buf[i]) | (np.uint64(buf[i + 1]) << np.uint64(8))
                | (np.uint64(buf[i + 2]) << np.uint64(16)) | (np.uint64(buf[i + 3]) << np.uint64(24))
                | (np.uint64(buf[i + 4]) << np.uint64(32)) | (np.uint64(buf[i + 5]) << np.uint64(40))
                | (np.uint64(buf[i + 6]) << np.uint64(48)) | (np.uint64(buf[i + 7]) << np.uint64(56)))
        if count >= 8:
            return word
        return word & ((np.uint64(1) << np.uint64(8 * count)) - np.uint64(1))
    word = np.uint64(0)
    for j in range(count):
        word |= np.uint64(buf[i + j]) << np.uint64(8 * j)
    return word


@kernel(inline="always")
def piece_key(buf, start, length):
    """64-bit key of ``buf[start:start + length]`` (``length >= 1``), never 0.

    Up to ``SHORT_PIECE`` bytes the key is the bytes themselves with the length in the top byte,
    so equal keys mean equal pieces. Longer pieces hash 8 bytes at a time, with
    ``min(length, 255)`` in the top byte; equal keys then still need a comparison of the bytes.
    """
    if length <= SHORT_PIECE:
        return _word_at(buf, start, length) | (np.uint64(length) << np.uint64(56))
    h = FNV_OFFSET
    i = 0
    while i < length:
        h = (h ^ _word_at(buf, start + i, min(8, length - i))) * GOLDEN
        h ^= h >> np.uint64(29)
        i += 8
    return (h >> np.uint64(8)) | (np.uint64(min(length, 255)) << np.uint64(56))


@kernel(inline="always")
def key_home(key, mask):
    return np.int64((key * GOLDEN) >> np.uint64(40)) & mask


@kernel
def build_piece_table(pool, offsets, wanted, table):
    """Put token ``t`` (bytes ``pool[offsets[t]:offsets[t+1]]``) for every ``wanted[t]`` into ``table``
    (uint64 ``(2^k, 2)``, zero filled): open addressing by ``piece_key`` of the bytes, row ``(key, t)``."""
    mask = table.shape[0] - 1
    for t in range(offsets.shape[0] - 1):
        if not wanted[t]:
            continue
        key = piece_key(pool, offsets[t], offsets[t + 1] - offsets[t])
        slot = key_home(key, mask)
        while table[slot, 0] != 0:
            slot = (slot + 1) & mask
        table[slot, 0] = key
        table[slot, 1] = t


@kernel(inline="always")
def find_piece(buf, start, length, key, table, pool, offsets):
    """Token of the piece ``buf[start:start + length]`` (key ``key``) in a ``build_piece_table`` table, or -1."""
    mask = table.shape[0] - 1
    slot = key_home(key, mask)
    while True:
        k = table[slot, 0]
        if k == key:
            t = np.int64(table[slot, 1])
            if length <= SHORT_PIECE or (offsets[t + 1] - offsets[t] == length
                                         and same_span(pool, offsets[t], buf, start, length)):
                return t
        elif k == 0:
            return -1
        slot = (slot + 1) & mask


@kernel
def self_merging_tokens(pool, offsets, byte_ids, pairs, nexts, lefts, rights, made, priorities):
    """bool per token: its bytes (two to ``MAX_CACHED_PIECE``) merge, by the byte-level rule, into
    exactly that token.

    A piece equal to such a token encodes as that token, so the encoder may look it up directly.
    Longer tokens are left to the encoder's long-piece pass, which gives them the same ids.
    """
    n = offsets.shape[0] - 1
    wanted = np.zeros(n, dtype=np.bool_)
    parts = np.empty(MAX_CACHED_PIECE, dtype=np.int64)
    part_priority = np.empty(MAX_CACHED_PIECE, dtype=np.int64)
    for t in range(n):
        length = offsets[t + 1] - offsets[t]
        if length < 2 or length > MAX_CACHED_PIECE:
            continue
        for i in range(length):
            parts[i] = byte_ids[pool[offsets[t] + i]]
        m = merge_short(parts, length, False, pairs, nexts, made, priorities, part_priority)
        wanted[t] = m == 1 and parts[0] == t
    return wanted


def new_piece_cache(slots: int = 1 << 17, byte_capacity: int = 1 << 20, id_capacity: int = 1 << 18) -> tuple:
    """An empty piece cache for ``encode_bytes``: ``(table, byte pool, id pool, state)``; ``slots``
    a power of two (about 6 MB with the defaults)."""
    if slots < 64 or slots & (slots - 1):
        raise ValueError(f"piece cache slots must be a power of two >= 64, got {slots}")
    return (np.zeros((slots, 4), dtype=np.uint64), np.empty(byte_capacity, dtype=np.uint8),
            np.empty(id_capacity, dtype=np.uint32), np.zeros(3, dtype=np.int64))


# Columns of a piece cache row (``encode_bytes``); key 0 = free.
CACHE_KEY, CACHE_BYTES, CACHE_IDS, CACHE_COUNT = range(4)
# Entries of a piece cache's state array: rows in use, bytes of its byte pool used, ids of its id pool used.
CACHE_ENTRIES, CACHE_BYTES_USED, CACHE_IDS_USED = range(3)


@kernel(leaf=True)
def _encode_miss(buf, pos, length, key, slot, byte_ids, first, parts, part_priority, out, out_pos, cache, cache_bytes,
                 cache_ids, cache_state):
    """Merge a piece of up to ``MAX_CACHED_PIECE`` bytes found in neither table, write its ids at
    ``out[out_pos:]`` and remember them in the cache (at ``slot``, the free slot its probe ended on;
    its bytes too when they are longer than a key); returns the new ``out_pos``.

    When the table is three quarters full or a pool has no room, the cache is emptied first: it
    stays bounded, and the encoder linear."""
    for i in range(length):
        parts[i] = byte_ids[buf[pos + i]]
    m = merge_short_first(parts, length, first, part_priority)
    for i in range(m):
        out[out_pos + i] = parts[i]
    cache_size = cache.shape[0]
    stored = length if length > SHORT_PIECE else 0
    if (cache_state[CACHE_ENTRIES] >= (cache_size * 3) // 4
            or cache_state[CACHE_BYTES_USED] + stored > cache_bytes.shape[0]
            or cache_state[CACHE_IDS_USED] + m > cache_ids.shape[0]):
        for j in range(cache_size):
            cache[j, CACHE_KEY] = 0
        cache_state[CACHE_ENTRIES] = 0
        cache_state[CACHE_BYTES_USED] = 0
        cache_state[CACHE_IDS_USED] = 0
        slot = key_home(key, cache_size - 1)
    at_bytes, at_ids = cache_state[CACHE_BYTES_USED], cache_state[CACHE_IDS_USED]
    cache[slot, CACHE_KEY] = key
    cache[slot, CACHE_BYTES] = at_bytes
    cache[slot, CACHE_IDS] = at_ids
    cache[slot, CACHE_COUNT] = m
    for i in range(stored):
        cache_bytes[at_bytes + i] = buf[pos + i]
    for i in range(m):
        cache_ids[at_ids + i] = parts[i]
    cache_state[CACHE_ENTRIES] += 1
    cache_state[CACHE_BYTES_USED] = at_bytes + stored
    cache_state[CACHE_IDS_USED] = at_ids + m
    return out_pos + m


@kernel(leaf=True)
def _prefetch_pieces(buf, pos, ends, k, count, keys, token_table, cache):
    """``keys[j]`` = the ``piece_key`` of piece ``k + j`` (pieces ``k .. count - 1``, the first at ``pos``), and a
    prefetch of the rows its lookups in ``token_table`` and ``cache`` start on, for every piece of two or more
    bytes: the lookups of a block then meet lines already on their way instead of one miss after another."""
    token_mask = token_table.shape[0] - 1
    cache_mask = cache.shape[0] - 1
    for j in range(count - k):
        end = ends[k + j]
        length = end - pos
        if length > 1:
            key = piece_key(buf, pos, length)
            keys[j] = key
            prefetch(token_table, (key_home(key, token_mask), 0), False)
            prefetch(cache, (key_home(key, cache_mask), 0), False)
        pos = end


@kernel(leaf=True)
def _known_pieces(buf, pos, ends, k, count, keys, first_k, byte_ids, token_table, token_pool, token_offsets, cache,
                  cache_bytes, cache_ids, out, out_pos):
    """Write the ids of pieces ``k, k + 1, ...`` (ending at ``ends[k]``, ..., the first at ``pos``) while
    each is one byte, a token of ``token_table`` or in ``cache``; stops at ``count`` or at a piece
    found in neither. Returns ``(k, pos, out_pos, key, slot)``: that piece, its start, where its ids
    go, its key and the free cache slot its probe ended on. No calls in the loop."""
    cache_mask = cache.shape[0] - 1
    while k < count:
        end = ends[k]
        length = end - pos
        if length == 1:
            out[out_pos] = byte_ids[buf[pos]]
            out_pos += 1
            pos = end
            k += 1
            continue
        key = keys[k - first_k]
        token = find_piece(buf, pos, length, key, token_table, token_pool, token_offsets)
        if token >= 0:
            out[out_pos] = token
            out_pos += 1
            pos = end
            k += 1
            continue
        slot = key_home(key, cache_mask)
        if length > MAX_CACHED_PIECE:  # never cached
            return k, pos, out_pos, key, slot
        while cache[slot, CACHE_KEY] != 0:
            if cache[slot, CACHE_KEY] == key and (length <= SHORT_PIECE or same_span(
                    cache_bytes, np.int64(cache[slot, CACHE_BYTES]), buf, pos, length)):
                break
            slot = (slot + 1) & cache_mask
        if cache[slot, CACHE_KEY] == 0:
            return k, pos, out_pos, key, slot
        first = np.int64(cache[slot, CACHE_IDS])
        count_ids = np.int64(cache[slot, CACHE_COUNT])
        for j in range(count_ids):
            out[out_pos + j] = cache_ids[first + j]
        out_pos += count_ids
        pos = end
        k += 1
    return k, pos, out_pos, np.uint64(0), 0


@kernel(inline="always")
def _call_scratch(pieces, cache_limit):
    """A call's cache of merged pieces for ``encode_word_documents``, rows ``(key, piece start, start
    of its ids in out, number of ids)`` with key 0 = free, of 64 to ``cache_limit`` slots (power of
    two, about ``pieces``), and the merge scratch ``parts``, ``part_priority`` for pieces of up to
    ``LONG_WORD`` symbols."""
    cache_size = 64
    while cache_size < cache_limit and cache_size < pieces:
        cache_size <<= 1
    return np.zeros((cache_size, 4), dtype=np.uint64), np.empty(LONG_WORD, np.int64), np.empty(LONG_WORD, np.int64)


@kernel(inline="always")
def encode_piece_block(buf, pos, ends, block, count, keys, byte_ids, first, parts, part_priority, token_table,
                       token_pool, token_offsets, cache, cache_bytes, cache_ids, cache_state, out, out_pos, long_pieces,
                       long_count):
    """Byte-level ids of the pieces ``block .. count - 1`` (ending at ``ends[k]``, the first at ``pos``) at
    ``out[out_pos:]``: their keys computed and their rows prefetched first (``keys``: ``PIECE_BLOCK``
    entries), then looked up (``_known_pieces``); a piece in neither table is merged and cached
    (``_encode_miss``), one longer than ``MAX_CACHED_PIECE`` written as its bytes and recorded in
    ``long_pieces`` (int64 rows ``(start in out, length)``, room for ``long_capacity`` of the text).
    Returns ``(pos, out_pos, long_count)``."""
    _prefetch_pieces(buf, pos, ends, block, count, keys, token_table, cache)
    k = block
    while k < count:
        k, pos, out_pos, key, slot = _known_pieces(buf, pos, ends, k, count, keys, block, byte_ids, token_table,
                                                   token_pool, token_offsets, cache, cache_bytes, cache_ids, out,
                                                   out_pos)
        if k < count:  # piece k is in neither table
            end = ends[k]
            if end - pos > MAX_CACHED_PIECE:
                long_pieces[long_count, 0] = out_pos
                long_pieces[long_count, 1] = end - pos
                long_count += 1
                for i in range(pos, end):
                    out[out_pos] = byte_ids[buf[i]]
                    out_pos += 1
            else:
                out_pos = _encode_miss(buf, pos, end - pos, key, slot, byte_ids, first, parts, part_priority, out,
                                       out_pos, cache, cache_bytes, cache_ids, cache_state)
            pos = end
            k += 1
    return pos, out_pos, long_count


@kernel(inline="always")
def begin_document(out, out_offsets, document_offsets, d, out_pos, wrap, bos):
    """Document ``d`` starts at ``out_pos``: record it and write BOS when wrapping; returns the new
    position and the document's span ``[start, stop)`` in the input."""
    out_offsets[d] = out_pos
    if wrap:
        out[out_pos] = bos
        out_pos += 1
    return out_pos, document_offsets[d], document_offsets[d + 1]


@kernel(inline="always")
def long_capacity(length):
    """Rows a ``long_pieces`` array needs for a text of ``length`` bytes: each long piece is longer than
    ``MAX_CACHED_PIECE`` (a kernel, so the encoders that size their own rows inside a kernel use this rule too)."""
    return length // (MAX_CACHED_PIECE + 1) + 1


def encode_scratch(length: int) -> tuple:
    """The scratch ``encode_bytes`` takes for a text of ``length`` bytes: ``(ends, keys, parts,
    part_priority, long_pieces)`` (``long_pieces`` is not touched unless a piece is long)."""
    return (np.empty(PIECE_BLOCK, dtype=np.int64), np.empty(PIECE_BLOCK, dtype=np.uint64),
            np.empty(LONG_WORD, dtype=np.int64), np.empty(LONG_WORD, dtype=np.int64),
            np.empty((long_capacity(length), 2), dtype=np.int64))


@kernel(leaf=True)
def encode_bytes(
    buf, document_offsets, classes, table, pattern, byte_ids, first,
    token_table, token_pool, token_offsets, cache, cache_bytes, cache_ids, cache_state, bos, eos, wrap,
    ends, keys, parts, part_priority, long_pieces, out, out_offsets,
):
    """Encode every document of ``buf`` into ``out`` (uint32); ``out_offsets[d]`` = start of document d.

    Byte b starts as symbol ``byte_ids[b]``; pieces merge by the byte-level (not ordered) rule
    (``merge_short_first`` over ``first``, a ``bpe_merge.first_entry_table``). A
    piece found in ``token_table`` (``build_piece_table``) is that token; any other piece of up to
    ``MAX_CACHED_PIECE`` bytes is merged on its first occurrence and its ids are remembered in the
    piece cache, which outlives the call (the caller keeps one per thread): ``cache`` uint64
    ``(2^k, 4)`` rows ``(key, start of its bytes in cache_bytes, start of its ids in cache_ids,
    number of ids)``, key 0 = free; ``cache_bytes`` uint8 holds the bytes of pieces longer than a
    key (``SHORT_PIECE``), ``cache_ids`` uint32 their ids; ``cache_state`` int64[3] counts rows and
    pool entries in use. The cache empties itself when full (``_encode_miss``), so memory stays
    bounded and the time linear. A piece longer than ``MAX_CACHED_PIECE`` is written unmerged (its
    byte ids) and recorded in ``long_pieces``.
    ``out`` needs ``len(buf) + 2 * documents`` entries; with ``wrap`` each document is
    ``[bos, ids..., eos]``. Returns ``(ids written, long pieces)``: when there are long pieces
    (rows of ``long_pieces``), ``bpe_merge.merge_long_pieces`` finishes the encoding. ``table``:
    ``pretokenize.ascii_table(classes)``; ``ends`` ... ``long_pieces``: ``encode_scratch(len(buf))``,
    so the kernel creates no array (a ``leaf``, without reference counts).

    Pieces are cut ``PIECE_BLOCK`` at a time (``scan_pieces``), then looked up in a loop without
    calls; only a piece to merge leaves it.
    """
    long_count = np.int64(0)
    out_pos = np.int64(0)
    for d in range(document_offsets.shape[0] - 1):
        out_pos, pos, end_of_document = begin_document(out, out_offsets, document_offsets, d, out_pos, wrap, bos)
        while pos < end_of_document:
            count = scan_document(buf, document_offsets[d], pos, end_of_document, classes, table, pattern, ends,
                                  np.int64(0), np.int64(PIECE_BLOCK))
            pos, out_pos, long_count = encode_piece_block(
                buf, pos, ends, 0, count, keys, byte_ids, first, parts, part_priority, token_table, token_pool,
                token_offsets, cache, cache_bytes, cache_ids, cache_state, out, out_pos, long_pieces, long_count)
        if wrap:
            out[out_pos] = eos
            out_pos += 1
    out_offsets[document_offsets.shape[0] - 1] = out_pos
    return out_pos, long_count


@kernel
def encode_word_documents(cps, document_offsets, word_classes, char_table, pairs, nexts, made, priorities,
                          cache_limit, first_id, bos, eos, wrap, out, out_offsets):
    """Character-level BPE of every document of ``cps`` (uint32 code points) in one pass.

    Pieces are those of ``\\w+|[^\\w\\s]|\\s`` (``word_classes``: 1 = word character); each
    character maps to its symbol through ``char_table`` (int64 by code point, -1 = unknown), and a
    piece's symbols merge in merge order (the ``ordered`` rule), emitted as ``symbol + first_id``
    (uint32). A piece of several characters is merged once per call: a cache of at most
    ``cache_limit`` slots (power of two; emptied when three quarters full; pieces up to
    ``MAX_CACHED_PIECE`` characters) points at the ids of its first occurrence in ``out``. A longer
    piece is written unmerged and recorded in ``long_pieces`` (see ``encode_bytes``). ``out``
    needs ``len(cps) + 2 * documents`` entries; with ``wrap`` each document is ``[bos, ids..., eos]``.
    Returns ``(ids written, position of the first unknown character or -1, long_pieces, long pieces)``.
    """
    n = cps.shape[0]
    cache, parts, part_priority = _call_scratch(n // 16, cache_limit)
    cache_size = cache.shape[0]
    cache_mask = cache_size - 1
    cache_used = np.int64(0)  # not literal 0 (see encode_bytes)
    long_pieces = np.empty((0, 2), dtype=np.int64)
    long_count = np.int64(0)
    limit = char_table.shape[0]
    out_pos = np.int64(0)
    for d in range(document_offsets.shape[0] - 1):
        out_pos, pos, stop = begin_document(out, out_offsets, document_offsets, d, out_pos, wrap, bos)
        while pos < stop:
            end = word_end(cps, pos, stop, word_classes)
            length = end - pos
            if length == 1:
                c = cps[pos]
                symbol = char_table[c] if c < limit else -1
                if symbol < 0:
                    return out_pos, pos, long_pieces, long_count
                out[out_pos] = symbol + first_id
                out_pos += 1
                pos = end
                continue
            cacheable = length <= MAX_CACHED_PIECE
            slot = 0
            key = np.uint64(0)
            if cacheable:
                key = (hash_span(cps, pos, end) >> np.uint64(8)) | (np.uint64(length) << np.uint64(56))  # never 0
                slot = key_home(key, cache_mask)
                while cache[slot, 0] != 0:
                    if cache[slot, 0] == key and same_span(cps, np.int64(cache[slot, 1]), cps, pos, length):
                        break
                    slot = (slot + 1) & cache_mask
                if cache[slot, 0] != 0:  # the ids of an earlier occurrence are already in ``out``
                    first = np.int64(cache[slot, 2])
                    count = np.int64(cache[slot, 3])
                    for j in range(count):
                        out[out_pos + j] = out[first + j]
                    out_pos += count
                    pos = end
                    continue
            for i in range(length):
                c = cps[pos + i]
                symbol = char_table[c] if c < limit else -1
                if symbol < 0:
                    return out_pos, pos + i, long_pieces, long_count
                if cacheable:
                    parts[i] = symbol
                else:  # merged by merge_long_pieces
                    out[out_pos + i] = symbol + first_id
            if not cacheable:
                long_pieces = record_long(long_pieces, long_count, out_pos, length)
                long_count += 1
                out_pos += length
                pos = end
                continue
            m = merge_short(parts, length, True, pairs, nexts, made, priorities, part_priority)
            for i in range(m):
                out[out_pos + i] = parts[i] + first_id
            if cacheable:
                if cache_used >= (cache_size * 3) // 4:  # evict everything: bounded and linear
                    for j in range(cache_size):
                        cache[j, 0] = 0
                    cache_used = 0
                    slot = key_home(key, cache_mask)
                cache[slot, 0] = key
                cache[slot, 1] = pos
                cache[slot, 2] = out_pos
                cache[slot, 3] = m
                cache_used += 1
            out_pos += m
            pos = end
        if wrap:
            out[out_pos] = eos
            out_pos += 1
    out_offsets[document_offsets.shape[0] - 1] = out_pos
    return out_pos, -1, long_pieces, long_count
