"""Plain-loop twins of the byte-level BPE kernels: slow, obvious, and the reference for the tests.

- ``naive_pretokenize``: the patterns run by the ``regex`` module (the definition to match).
- ``naive_encode_ranks`` / ``naive_encode_merges``: tiktoken's and GPT-2's merge loops.
- ``naive_piece_key`` / ``naive_self_merging``: the encoder's piece key and its table of pieces
  that are their own token.
- ``naive_train``: recount every pair after every merge and pick the best by the tie rule.
- ``stdlib_texts``: the standard library's .py files (sorted, UTF-8 only) as a test corpus.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import regex

from engine.tokenizers.byte_bpe import bytes_to_unicode
from engine.tokenizers.pretokenize import PATTERNS


def naive_pretokenize(text: str, pattern: str) -> list[str]:
    return regex.findall(PATTERNS[pattern], text)


def naive_encode_ranks(piece: bytes, ranks: dict[bytes, int], whole_piece_first: bool = True) -> list[int]:
    """tiktoken: a whole-piece token, else merge the lowest-ranked adjacent concatenation, leftmost first
    (``whole_piece_first=False``: merge every piece, whole tokens included)."""
    if whole_piece_first and piece in ranks:
        return [ranks[piece]]
    parts = [piece[i:i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, best_rank = -1, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best < 0:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return [ranks[p] for p in parts]


def naive_piece_key(piece: bytes) -> int:
    """``engine.kernels.bpe_encode.piece_key``: up to 7 bytes the bytes (little-endian) with the length in
    the top byte; longer, a hash of 8-byte words with ``min(length, 255)`` in the top byte."""
    mask = (1 << 64) - 1
    if len(piece) <= 7:
        return int.from_bytes(piece, "little") | (len(piece) << 56)
    h = 0xCBF29CE484222325
    for i in range(0, len(piece), 8):
        h = ((h ^ int.from_bytes(piece[i:i + 8], "little")) * 0x9E3779B97F4A7C15) & mask
        h ^= h >> 29
    return (h >> 8) | (min(len(piece), 255) << 56)


def naive_self_merging(tokens: list[bytes | None], merge_piece, longest: int = 64) -> list[bool]:
    """Per token: it has two to ``longest`` bytes and ``merge_piece(its bytes)`` is exactly ``[that token]``."""
    return [t is not None and 2 <= len(t) <= longest and merge_piece(t) == [i] for i, t in enumerate(tokens)]


def naive_encode_merges(piece: bytes, byte_ids: list[int], merges: dict[tuple[int, int], tuple[int, int]]) -> list[int]:
    """GPT-2 / HF: merge the adjacent pair with the lowest merge priority, leftmost first.

    ``merges`` maps (left id, right id) -> (priority, merged id).
    """
    parts = [byte_ids[b] for b in piece]
    while len(parts) > 1:
        best, best_priority = -1, None
        for i in range(len(parts) - 1):
            m = merges.get((parts[i], parts[i + 1]))
            if m is not None and (best_priority is None or m[0] < best_priority):
                best, best_priority = i, m[0]
        if best < 0:
            break
        parts[best:best + 2] = [merges[(parts[best], parts[best + 1])][1]]
    return parts


def naive_train(texts: list[str], new_tokens: int, *, pattern: str = "gpt2", tie_break: str = "first"):
    """Merges as (left bytes, right bytes) in order, with internal ids bytes=b, new token k=256+k.

    Counts pairs from scratch each step: best = highest count, then the tie rule ("first":
    earliest (word rank, byte offset); "hf": smallest (hf order left, hf order right)).
    """
    counts: dict[bytes, int] = {}
    for text in texts:
        for piece in naive_pretokenize(text, pattern):
            data = piece.encode("utf-8")
            counts[data] = counts.get(data, 0) + 1
    words = [list(w) for w in counts]  # dicts keep first-appearance order
    weights = list(counts.values())
    token_bytes = [bytes([b]) for b in range(256)]
    table = bytes_to_unicode()
    order = {b: rank for rank, b in enumerate(sorted(range(256), key=lambda b: ord(table[b])))}
    merges = []
    created = 0
    while created < new_tokens:
        pair_count: dict[tuple[int, int], int] = {}
        first: dict[tuple[int, int], tuple[int, int]] = {}
        for w, word in enumerate(words):
            offset = 0
            for i in range(len(word) - 1):
                pair = (word[i], word[i + 1])
                pair_count[pair] = pair_count.get(pair, 0) + weights[w]
                first.setdefault(pair, (w, offset))
                offset += len(token_bytes[word[i]])
        if not pair_count:
            break
        if tie_break == "first":
            best = min(pair_count, key=lambda p: (-pair_count[p], first[p]))
        else:
            best = min(pair_count, key=lambda p: (-pair_count[p], order[p[0]], order[p[1]]))
        merged = token_bytes[best[0]] + token_bytes[best[1]]
        if merged in token_bytes:
            new_id = token_bytes.index(merged)
        else:
            new_id = len(token_bytes)
            token_bytes.append(merged)
            order[new_id] = new_id
            created += 1
        merges.append((token_bytes[best[0]], token_bytes[best[1]]))
        for w, word in enumerate(words):
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            words[w] = out
    return merges


def stdlib_texts(max_bytes: int | None = None) -> list[str]:
    """The standard library's .py files in sorted path order, UTF-8 decodable ones only."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts, total = [], 0
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            text = path.read_bytes().decode("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(text)
        total += len(text)
        if max_bytes is not None and total >= max_bytes:
            break
    return texts
