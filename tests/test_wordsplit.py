"""Word-split kernel and word interning vs ``re`` and plain loops."""

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.kernels.wordsplit import OTHER, SPACE, WORD, char_classes, code_points, intern_words, split_words
from tests.naive_tokenizers import naive_split, naive_word_counts


def pieces_of(text, bounds=None):
    cps = code_points(text)
    starts, ends = split_words(cps, bounds)
    return [text[s:e] for s, e in zip(starts.tolist(), ends.tolist())]


def test_class_table_matches_re_on_tricky_code_points():
    table = char_classes()
    tricky = [0x1C, 0x1D, 0x1E, 0x1F, 0x85, 0xA0, 0x5F, 0x2028, 0x2029, 0x3000, 0x200B, 0xFEFF,
              0x0660, 0x00B2, 0x2160, 0x00AA, 0x0301, 0x1F600, 0x10FFFF, 0xD800]
    for cp in tricky:
        ch = chr(cp)
        expected = WORD if re.match(r"\w", ch) else SPACE if re.match(r"\s", ch) else OTHER
        assert table[cp] == expected, hex(cp)
    assert table[ord("_")] == WORD and table[ord(" ")] == SPACE and table[ord(",")] == OTHER


def test_class_table_matches_re_on_sample():
    table = char_classes()
    rng = np.random.default_rng(0)
    for cp in rng.integers(0, 0x110000, 3000).tolist():
        ch = chr(cp)
        expected = WORD if re.match(r"\w", ch) else SPACE if re.match(r"\s", ch) else OTHER
        assert table[cp] == expected, hex(cp)


def test_split_golden():
    assert pieces_of("Hello, wörld!\n  x_1") == ["Hello", ",", " ", "wörld", "!", "\n", " ", " ", "x_1"]
    assert pieces_of("") == []
    assert pieces_of("٣٤abc\u00a0..") == ["٣٤abc", "\u00a0", ".", "."]


def test_split_never_crosses_document_bounds():
    text = "abcdef gh"
    assert pieces_of(text, np.array([0, 3, 3, 9], dtype=np.int64)) == ["abc", "def", " ", "gh"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_split_matches_re(text):
    assert pieces_of(text) == naive_split(text)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab é.\n😀", max_size=60))
def test_intern_matches_dict(text):
    cps = code_points(text)
    starts, ends = split_words(cps)
    word_of_piece, first_piece, counts, word_cps, word_offsets = intern_words(cps, starts, ends)
    expected = naive_word_counts(text)
    words = [word_cps[word_offsets[w] : word_offsets[w + 1]].tobytes().decode("utf-32-le") for w in range(len(counts))]
    assert words == list(expected)
    assert counts.tolist() == list(expected.values())
    pieces = naive_split(text)
    assert [words[w] for w in word_of_piece.tolist()] == pieces
    assert [pieces[p] for p in first_piece.tolist()] == words
