"""The code people write without engine: the plain-Python peers of ``engine bench``.

These are the alternatives a user types in an afternoon (standard library only), kept in bench/
so that the benchmarks never import the test suite. Each peer row checks that its alternative
gives engine's output before anything is timed.

- ``plan_bfd``: best-fit decreasing packing with ``bisect`` over the sorted free capacities and
  a heap of rows per capacity (lowest row first), pieces longest first;
- ``train_bpe``: the textbook BPE loop (count every adjacent pair, merge the most frequent,
  repeat); ``max`` over a dict in insertion order breaks ties by first occurrence;
- ``encode_bpe``: a word cache in front of "apply every merge in order";
- ``ByteTokenizer``: id = UTF-8 byte + 2 (BOS 0, EOS 1), the cheapest real tokenizer, so that a
  store benchmark times the store and not the tokenizer.
"""

from __future__ import annotations

import bisect
import heapq
import re
from collections import Counter

import numpy as np

from engine.tokenizers.base import Tokenizer, register_tokenizer

WORDS = re.compile(r"\w+|[^\w\s]|\s")


def plan_bfd(lengths, row_length: int):
    """(pieces, placement, row count) of documents of ``lengths`` tokens packed into rows.

    A document of n tokens has n - 1 (input, target) positions, cut into pieces of at most
    ``row_length``: ``pieces`` holds ``(document, start, size)`` in document order and
    ``placement`` the ``(row, column, segment)`` of each piece.
    """
    pieces = []
    for doc, n in enumerate(lengths):
        positions = n - 1
        pieces.extend((doc, lo, min(row_length, positions - lo)) for lo in range(0, positions, row_length))
    free_sizes: list[int] = []  # sorted capacities that some row still has
    rows_with: dict[int, list[int]] = {}  # capacity -> heap of rows with exactly that much room
    segments_in_row: list[int] = []
    placement: list[tuple[int, int, int]] = [(0, 0, 0)] * len(pieces)
    for index in sorted(range(len(pieces)), key=lambda i: -pieces[i][2]):  # stable: ties in piece order
        size = pieces[index][2]
        slot = bisect.bisect_left(free_sizes, size)
        if slot < len(free_sizes):
            room = free_sizes[slot]
            heap = rows_with[room]
            row = heapq.heappop(heap)
            if not heap:
                free_sizes.pop(slot)
                del rows_with[room]
        else:
            room, row = row_length, len(segments_in_row)
            segments_in_row.append(0)
        placement[index] = (row, row_length - room, segments_in_row[row])
        segments_in_row[row] += 1
        left = room - size
        if left:
            if left in rows_with:
                heapq.heappush(rows_with[left], row)
            else:
                rows_with[left] = [row]
                bisect.insort(free_sizes, left)
    return pieces, placement, len(segments_in_row)


def _merged(symbols: list[str], left: str, right: str) -> list[str]:
    """``symbols`` with each (left, right) neighbour pair joined, left to right, no overlaps."""
    joined: list[str] = []
    for symbol in symbols:
        if joined and symbol == right and joined[-1] == left:
            joined[-1] = left + right  # a joined symbol never equals ``left`` again
        else:
            joined.append(symbol)
    return joined


def train_bpe(text: str, merges: int) -> list[tuple[str, str]]:
    """The most frequent adjacent pair, ``merges`` times; ties go to the pair seen first."""
    vocab = [(list(word), count) for word, count in Counter(WORDS.findall(text)).items()]
    learned = []
    for _ in range(merges):
        pair_counts: dict[tuple[str, str], int] = {}
        for symbols, count in vocab:
            for pair in zip(symbols, symbols[1:]):
                pair_counts[pair] = pair_counts.get(pair, 0) + count
        if not pair_counts:
            break
        left, right = max(pair_counts, key=pair_counts.__getitem__)
        learned.append((left, right))
        vocab = [(_merged(symbols, left, right) if left in symbols else symbols, count) for symbols, count in vocab]
    return learned


def encode_bpe(text: str, merges) -> list[str]:
    """The pieces of ``text``: each distinct word gets every merge in order, once."""
    cache: dict[str, list[str]] = {}
    pieces: list[str] = []
    for word in WORDS.findall(text):
        done = cache.get(word)
        if done is None:
            done = list(word)
            for left, right in merges:
                if len(done) == 1:
                    break
                done = _merged(done, left, right)
            cache[word] = done
        pieces += done
    return pieces


@register_tokenizer
class ByteTokenizer(Tokenizer):
    """UTF-8 bytes past the two specials: id = byte + 2 (258 ids); nothing to configure."""

    kind = "bench-bytes"
    vocab_size = 258

    @classmethod
    def _from_payload(cls, payload):
        return cls()

    def _payload(self):
        return {}

    def _encode(self, text, document_id):
        ids = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.uint32)
        ids += 2
        return ids

    def tokenize(self, text):
        return [chr(b) for b in text.encode("utf-8")]

    def decode(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        return (ids[ids > 1] - 2).astype(np.uint8).tobytes().decode("utf-8")
