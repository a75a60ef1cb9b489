"""SentencePiece's normalizer (``normalize_documents``), per document (a sentence):

- at each position the longest user-defined symbol (``ud_table``) is copied as it is; else the
  longest key of the precompiled charsmap (``trie``: a Darts double array of uint32 units; the
  value of a key is the offset of its NUL-terminated replacement in ``repl``; only the first 32
  keys that prefix the text are considered, as SentencePiece's search returns); else one
  character is copied;
- with ``remove_extra_whitespaces``: leading replacements that are exactly one space are dropped,
  leading spaces of a replacement are dropped after a replacement that ended with a space (or at
  the start), and trailing space symbols are dropped at the end;
- ``escape`` writes each space as U+2581 (``▁``); ``add_dummy`` puts one space symbol before the
  text (after it when ``suffix``, SentencePiece's ``treat_whitespace_as_suffix``), unless the
  text is empty or all removed whitespace.

The merges that follow are ``engine.kernels.spm_bpe``.
"""

from __future__ import annotations

import numpy as np

from engine.kernels import kernel

__all__ = ["MAX_TRIE_RESULTS", "char_len", "decode_char", "charsmap_match", "ud_match", "build_ud_table", "first_bytes",
           "normalize_documents"]

MAX_TRIE_RESULTS = 32  # SentencePiece's kMaxTrieResultsSize


@kernel(inline="always")
def char_len(lead):
    """Bytes of the UTF-8 character starting with byte ``lead`` (SentencePiece's OneCharLen)."""
    if lead < 0x80:
        return 1
    if lead < 0xE0:
        return 2
    if lead < 0xF0:
        return 3
    return 4


@kernel(inline="always")
def decode_char(buf, pos, length):
    c = np.int64(buf[pos])
    if length == 1:
        return c
    if length == 2:
        return ((c & 0x1F) << 6) | (np.int64(buf[pos + 1]) & 0x3F)
    if length == 3:
        return ((c & 0x0F) << 12) | ((np.int64(buf[pos + 1]) & 0x3F) << 6) | (np.int64(buf[pos + 2]) & 0x3F)
    return (((c & 0x07) << 18) | ((np.int64(buf[pos + 1]) & 0x3F) << 12) | ((np.int64(buf[pos + 2]) & 0x3F) << 6)
            | (np.int64(buf[pos + 3]) & 0x3F))


@kernel(leaf=True)
def charsmap_match(trie, buf, pos, stop):
    """``(length, value)`` of the longest of the first ``MAX_TRIE_RESULTS`` charsmap keys that prefix
    ``buf[pos:stop]`` (Darts-clone's commonPrefixSearch), or ``(0, 0)``."""
    size = trie.shape[0]
    if size == 0:
        return 0, 0
    node = np.int64(0)
    unit = np.int64(trie[0])
    node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
    best_length, best_value, found = 0, 0, 0
    for i in range(pos, stop):
        c = np.int64(buf[i])
        node ^= c
        if node < 0 or node >= size:
            break
        unit = np.int64(trie[node])
        if (unit & ((1 << 31) | 0xFF)) != c:
            break
        node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
        if (unit >> 8) & 1:
            if found < MAX_TRIE_RESULTS and 0 <= node < size:
                length = i - pos + 1
                if best_length == 0 or length > best_length:
                    best_length = length
                    best_value = np.int64(trie[node]) & ((1 << 31) - 1)
            found += 1
    return best_length, best_value


@kernel
def build_ud_table(pool, offsets, syms):
    """A byte trie of the user-defined symbols ``pool[offsets[k]:offsets[k+1]]`` (symbol ``syms[k]``):
    ``(table, values)``: ``table`` int64 rows ``((node << 8) | byte, child)`` by open addressing (-1
    free), ``values[node]`` the symbol ending there or -1. Node 0 is the root."""
    total = offsets[offsets.shape[0] - 1]
    size = 16
    while size < 2 * total + 2:
        size <<= 1
    table = np.full((size, 2), -1, dtype=np.int64)
    values = np.full(total + 1, -1, dtype=np.int64)
    nodes = 1
    mask = size - 1
    for k in range(offsets.shape[0] - 1):
        node = np.int64(0)
        for i in range(offsets[k], offsets[k + 1]):
            key = (node << 8) | np.int64(pool[i])
            slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask
            while table[slot, 0] != key and table[slot, 0] != -1:
                slot = (slot + 1) & mask
            if table[slot, 0] == -1:
                table[slot, 0] = key
                table[slot, 1] = nodes
                nodes += 1
            node = table[slot, 1]
        values[node] = syms[k]
    return table, values[:nodes].copy()


@kernel(inline="always")
def ud_match(table, values, buf, pos, stop):
    """``(length, symbol)`` of the longest user-defined symbol at ``buf[pos:stop]``, or ``(0, -1)``."""
    mask = table.shape[0] - 1
    node = np.int64(0)
    best_length, best_sym = 0, np.int64(-1)
    for i in range(pos, stop):
        key = (node << 8) | np.int64(buf[i])
        slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask
        while table[slot, 0] != key and table[slot, 0] != -1:
            slot = (slot + 1) & mask
        if table[slot, 0] == -1:
            break
        node = table[slot, 1]
        if values[node] >= 0:
            best_length = i - pos + 1
            best_sym = values[node]
    return best_length, best_sym


@kernel(inline="always")
def _prefix(buf, pos, stop, trie, repl, ud_table, ud_values, has_ud):
    """SentencePiece's NormalizePrefix: ``(from_repl, start, length, consumed)``: the replacement is
    ``repl[start:start+length]`` when ``from_repl`` else ``buf[start:start+length]``."""
    if has_ud:
        length, _ = ud_match(ud_table, ud_values, buf, pos, stop)
        if length > 0:
            return False, pos, length, length
    length, value = charsmap_match(trie, buf, pos, stop)
    if length > 0:
        end = value
        while end < repl.shape[0] and repl[end] != 0:
            end += 1
        return True, value, end - value, length
    n = min(char_len(buf[pos]), stop - pos)
    return False, pos, n, n


@kernel(inline="always")
def _put_space(out, at, escape):
    if escape:
        out[at] = 0xE2
        out[at + 1] = 0x96
        out[at + 2] = 0x81
        return at + 3
    out[at] = 0x20
    return at + 1


@kernel
def first_bytes(trie, ud_table, ud_values, has_ud):
    """``(first, second)``: ``first[b]`` is 0 when no charsmap key or user-defined symbol starts with
    byte ``b``, 2 when ``b`` alone is a key or a user-defined symbol starts with it, else 1;
    ``second[b, c]`` is whether some key starts with ``b c``. A character whose first byte has
    ``first`` 0, or 1 and a next byte that ``second`` does not list, is copied without a search."""
    first = np.zeros(256, dtype=np.int8)
    second = np.zeros((256, 256), dtype=np.bool_)
    size = trie.shape[0]
    if size > 0:
        root = np.int64(0) ^ ((np.int64(trie[0]) >> 10) << ((np.int64(trie[0]) & (1 << 9)) >> 6))
        for b in range(256):
            node = root ^ b
            if not (0 <= node < size) or (np.int64(trie[node]) & ((1 << 31) | 0xFF)) != b:
                continue
            unit = np.int64(trie[node])
            first[b] = 2 if (unit >> 8) & 1 else 1
            node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
            for c in range(256):
                child = node ^ c
                if 0 <= child < size and (np.int64(trie[child]) & ((1 << 31) | 0xFF)) == c:
                    second[b, c] = True
    if has_ud:
        mask = ud_table.shape[0] - 1
        for b in range(256):
            key = np.int64(b)
            slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask
            while ud_table[slot, 0] != key and ud_table[slot, 0] != -1:
                slot = (slot + 1) & mask
            if ud_table[slot, 0] != -1:
                first[b] = 2
    return first, second


@kernel(leaf=True)
def normalize_documents(buf, document_offsets, trie, repl, ud_table, ud_values, has_ud, first, second, ascii_map,
                        add_dummy, remove_extra, escape, suffix, out, out_offsets):
    """Normalize every document of ``buf`` (UTF-8) into ``out`` (uint8) and ``out_offsets``
    (int64[D+1]); ``first``, ``second``: ``first_bytes`` of the tables; ``ascii_map[b]`` (int16, 128
    entries): the byte that ASCII byte ``b`` becomes without a search, -2 when it becomes nothing,
    -1 when it needs the search (a key starts with it and may be longer, or a user-defined symbol). Returns the bytes written,
    or -1 when ``out`` may lack room (the caller retries with a larger one): ``out`` needs
    ``3 * len(buf) + 6 * documents`` bytes, more when replacements are longer than their keys."""
    documents = document_offsets.shape[0] - 1
    total = document_offsets[documents]
    capacity = out.shape[0]
    at = np.int64(0)
    for d in range(documents):
        out_offsets[d] = at
        doc_start = at
        pos = document_offsets[d]
        stop = document_offsets[d + 1]
        if remove_extra:
            while pos < stop:
                b = buf[pos]
                if b < 0x80 and ascii_map[b] != -1:
                    if ascii_map[b] != 0x20:
                        break
                    pos += 1
                    continue
                plain = False  # an ASCII byte no search can change (see first_bytes)
                if b < 0x80:
                    f = first[b]
                    plain = f == 0 or (f == 1 and (pos + 1 >= stop or not second[np.int64(b), np.int64(buf[pos + 1])]))
                if plain:
                    if b != 0x20:
                        break
                    pos += 1
                    continue
                from_repl, start, length, consumed = _prefix(buf, pos, stop, trie, repl, ud_table, ud_values, has_ud)
                if length != 1 or (repl[start] if from_repl else buf[start]) != 0x20:
                    break
                pos += consumed
        if pos >= stop:
            continue
        if add_dummy and not suffix:
            at = _put_space(out, at, escape)
        prev_space = remove_extra
        while pos < stop:
            b = buf[pos]
            if b < 0x80 and ascii_map[b] != -1:
                a = ascii_map[b]
                if a == 0x20:
                    if not prev_space:
                        at = _put_space(out, at, escape)
                    prev_space = remove_extra
                elif a == -2:
                    if not remove_extra:
                        prev_space = False
                else:
                    out[at] = a
                    at += 1
                    prev_space = False
                pos += 1
                continue
            # a character no search can change (see first_bytes): copied
            f = first[b]
            if f == 0 or (f == 1 and (pos + 1 >= stop or not second[np.int64(b), np.int64(buf[pos + 1])])):
                if b == 0x20:
                    if not prev_space:
                        at = _put_space(out, at, escape)
                    prev_space = remove_extra
                    pos += 1
                elif b < 0x80:
                    out[at] = b
                    at += 1
                    prev_space = False
                    pos += 1
                else:
                    n = min(char_len(b), stop - pos)
                    for j in range(n):
                        out[at + j] = buf[pos + j]
                    at += n
                    pos += n
                    prev_space = False
                continue
            from_repl, start, length, consumed = _prefix(buf, pos, stop, trie, repl, ud_table, ud_values, has_ud)
            # room for this replacement, 3 bytes a byte for the rest and 6 a document
            if at + 3 * length + 3 * (total - pos - consumed) + 6 * (documents - d) > capacity:
                return -1
            i = start
            end = start + length
            if from_repl:
                if prev_space:
                    while i < end and repl[i] == 0x20:
                        i += 1
                if i < end:
                    for j in range(i, end):
                        if escape and repl[j] == 0x20:
                            at = _put_space(out, at, True)
                        else:
                            out[at] = repl[j]
                            at += 1
                    prev_space = repl[end - 1] == 0x20
            else:
                if prev_space:
                    while i < end and buf[i] == 0x20:
                        i += 1
                if i < end:
                    for j in range(i, end):
                        if escape and buf[j] == 0x20:
                            at = _put_space(out, at, True)
                        else:
                            out[at] = buf[j]
                            at += 1
                    prev_space = buf[end - 1] == 0x20
            pos += consumed
            if not remove_extra:
                prev_space = False
        if remove_extra:
            if escape:
                while at - doc_start >= 3 and out[at - 3] == 0xE2 and out[at - 2] == 0x96 and out[at - 1] == 0x81:
                    at -= 3
            else:
                while at > doc_start and out[at - 1] == 0x20:
                    at -= 1
        if add_dummy and suffix:
            at = _put_space(out, at, escape)
    out_offsets[documents] = at
    return at
