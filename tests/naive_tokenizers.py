"""Plain-loop twins of the tokenizer kernels: obviously correct, slow.

- ``naive_split``: ``re.findall`` of the word regex.
- ``naive_train_bpe``: recounts every pair before every merge and finds the tie winner by
  scanning occurrences in (word rank, character offset) order.
- ``naive_encode_bpe``: applies merge 0..N-1 in order to each word, memoised per word.
"""

from __future__ import annotations

import re

WORD_RE = re.compile(r"\w+|[^\w\s]|\s")


def naive_split(text: str) -> list[str]:
    return WORD_RE.findall(text)


def naive_word_counts(texts) -> dict[str, int]:
    """Distinct words in order of first appearance (dict order = rank) with their counts."""
    if isinstance(texts, str):
        texts = [texts]
    counts: dict[str, int] = {}
    for text in texts:
        for word in naive_split(text):
            counts[word] = counts.get(word, 0) + 1
    return counts


def merge_word(pieces: list[str], left: str, right: str) -> list[str]:
    """Replace non-overlapping (left, right) occurrences, scanning left to right."""
    out = []
    i = 0
    while i < len(pieces):
        if i + 1 < len(pieces) and pieces[i] == left and pieces[i + 1] == right:
            out.append(left + right)
            i += 2
        else:
            out.append(pieces[i])
            i += 1
    return out


def naive_train_bpe(texts, merges: int, tie_break: str = "first"):
    """Returns (alphabet string, merges [(left, right)], history [(k, tokens)])."""
    counts = naive_word_counts(texts)
    words = [list(w) for w in counts]
    freqs = list(counts.values())
    alphabet = "".join(sorted(set("".join(counts))))
    piece_id = {c: i for i, c in enumerate(alphabet)}
    history = [(0, sum(len(w) * f for w, f in zip(words, freqs)))]
    done = []
    for k in range(merges):
        stats: dict[tuple[str, str], list] = {}
        for rank, (word, f) in enumerate(zip(words, freqs)):
            offset = 0
            for i in range(len(word) - 1):
                pair = (word[i], word[i + 1])
                if pair not in stats:
                    stats[pair] = [0, (rank, offset)]  # first occurrence: scanned in (rank, offset) order
                stats[pair][0] += f
                offset += len(word[i])
        if not stats:
            break
        if tie_break == "first":
            best = min(stats, key=lambda p: (-stats[p][0], stats[p][1]))
        else:
            best = min(stats, key=lambda p: (-stats[p][0], piece_id[p[0]], piece_id[p[1]]))
        piece_id.setdefault(best[0] + best[1], len(piece_id))
        done.append(best)
        words = [merge_word(w, *best) for w in words]
        history.append((k + 1, sum(len(w) * f for w, f in zip(words, freqs))))
    return alphabet, done, history


def naive_encode_bpe(text: str, alphabet: str, merges) -> list[str]:
    """Pieces of ``text``: every word gets merge 0..N-1 applied in order (memoised per word)."""
    memo: dict[str, list[str]] = {}
    out: list[str] = []
    for word in naive_split(text):
        if word not in memo:
            for ch in word:
                if ch not in alphabet:
                    raise ValueError(f"unknown character {ch!r}")
            pieces = list(word)
            for left, right in merges:
                pieces = merge_word(pieces, left, right)
            memo[word] = pieces
        out.extend(memo[word])
    return out


def naive_bpe_vocab(alphabet: str, merges) -> dict[str, int]:
    """Piece text -> id: specials 0 and 1, characters, then new pieces in merge order."""
    vocab = {c: 2 + i for i, c in enumerate(alphabet)}
    for left, right in merges:
        vocab.setdefault(left + right, 2 + len(vocab))
    return vocab


def naive_heap_pops(operations) -> list[tuple[int, int]]:
    """Keys popped by ``operations`` (``("push", key0, key1, payload)`` or ``("pop",)``) from a min-heap
    ordered by (key0, key1): each pop takes the smallest key of a plain list."""
    rows: list[tuple[int, int, int]] = []
    popped = []
    for op in operations:
        if op[0] == "push":
            rows.append((op[1], op[2], op[3]))
        else:
            smallest = min(rows, key=lambda row: (row[0], row[1]))
            rows.remove(smallest)
            popped.append(smallest)
    return popped
