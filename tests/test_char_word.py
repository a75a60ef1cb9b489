"""Character and word tokenizers: exact ids, unknown input, round trips, files."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine.errors import ConfigurationError, TokenizerError
from engine.tokenizers import CharTokenizer, WordTokenizer, load_tokenizer


def test_char_vocabulary_and_ids():
    tok = CharTokenizer.fit("hello world")
    assert tok.alphabet == " dehlorw"
    assert tok.vocab_size == 10
    assert tok.encode("hello").tolist() == [5, 4, 6, 6, 7]
    assert tok.encode_document("he").tolist() == [0, 5, 4, 1]
    assert tok.encode_document("").tolist() == [0, 1]
    assert tok.decode([0, 5, 4, 1]) == "he"
    assert tok.tokenize("ol") == ["o", "l"]
    assert tok.encode("").dtype == np.uint32


def test_char_fit_several_texts_and_empty():
    assert CharTokenizer.fit(["ba", "c"]).alphabet == "abc"
    with pytest.raises(TokenizerError, match="empty"):
        CharTokenizer.fit("")


def test_char_unknown_names_character_document_and_offset():
    tok = CharTokenizer.fit("abc")
    with pytest.raises(TokenizerError) as info:
        tok.encode_document("abxc", document_id="doc-7")
    message = str(info.value)
    assert "'x'" in message and "U+0078" in message and "offset 2" in message and "'doc-7'" in message
    with pytest.raises(TokenizerError, match=r"offset 1 of document 'b'"):
        tok.encode_documents(["ab", "aéb"], ["a", "b"])


def test_char_decode_rejects_bad_ids():
    tok = CharTokenizer.fit("ab")
    with pytest.raises(TokenizerError, match="id 4 at position 1"):
        tok.decode([2, 4])


def test_char_encode_documents_matches_single(tmp_path):
    tok = CharTokenizer.fit("abc\n")
    texts = ["ab", "", "c\na"]
    values, offsets = tok.encode_documents(texts)
    assert offsets.tolist() == [0, 4, 6, 11]
    assert values.tolist() == np.concatenate([tok.encode_document(t) for t in texts]).tolist()
    assert values.dtype == np.uint32 and offsets.dtype == np.int64
    path = tok.save(tmp_path / "char.json")
    again = load_tokenizer(path)
    assert again == tok and again.hash == tok.hash and again.encode("cab").tolist() == tok.encode("cab").tolist()


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=50))
def test_char_round_trip(text):
    tok = CharTokenizer.fit(text)
    assert tok.decode(tok.encode(text)) == text
    assert len(tok.encode(text)) == len(text)


def test_word_vocabulary_and_ids():
    tok = WordTokenizer.fit("the cat, the hat")
    assert tok.pieces == [" ", ",", "cat", "hat", "the"]
    assert tok.vocab_size == 7
    assert tok.encode("the hat, cat").tolist() == [6, 2, 5, 3, 2, 4]
    assert tok.tokenize("the hat,") == ["the", " ", "hat", ","]
    assert tok.decode(tok.encode_document("cat the")) == "cat the"


def test_word_unknown_token_maps_and_counts():
    tok = WordTokenizer.fit("the cat", unknown="<unk>")
    assert tok.unknown_id == 2
    assert tok.pieces == [" ", "cat", "the"]
    ids = tok.encode("the dog and the cat")
    assert ids.tolist() == [5, 3, 2, 3, 2, 3, 5, 3, 4]
    assert tok.last_unknown_count == 2
    assert tok.count_unknown("dog dog cat") == 2
    # Unknown pieces decode to the unknown token: not byte-exact by design.
    assert tok.decode(ids) == "the <unk> <unk> the cat"
    with pytest.raises(ConfigurationError, match="unknown token 'cat' must be a non-empty string that is not a piece"):
        WordTokenizer.fit("the cat", unknown="cat")


def test_word_unknown_without_unk_is_an_error():
    tok = WordTokenizer.fit("the cat")
    with pytest.raises(TokenizerError) as info:
        tok.encode_document("the cat hat", document_id="d1")
    message = str(info.value)
    assert "'h'" in message and "U+0068" in message and "offset 8" in message and "'d1'" in message
    with pytest.raises(TokenizerError, match=r"piece 'act'.*offset 4"):
        tok.encode("the act")


def test_word_encode_documents_and_file(tmp_path):
    tok = WordTokenizer.fit(["a b", "c."], unknown="<unk>")
    texts = ["a b c", "", "c. z"]
    values, offsets = tok.encode_documents(texts)
    assert values.tolist() == np.concatenate([tok.encode_document(t) for t in texts]).tolist()
    assert offsets.tolist() == [0, 7, 9, 15]
    again = load_tokenizer(tok.save(tmp_path / "w.json"))
    assert again.hash == tok.hash and again.unknown == "<unk>"
    assert again.encode("c. z").tolist() == tok.encode("c. z").tolist()


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="ab 1_,.\n\té😀", min_size=1, max_size=60))
def test_word_round_trip(text):
    tok = WordTokenizer.fit(text)
    assert tok.decode(tok.encode(text)) == text
    assert "".join(tok.tokenize(text)) == text


def test_char_ids_are_specials_then_sorted_characters():
    tok = CharTokenizer.fit("hello world")
    assert tok.vocab_size == 10
    assert tok.encode("hello").tolist() == [5, 4, 6, 6, 7]
    assert tok.encode_document("").tolist() == [0, 1]


def test_word_ids_and_unknown_count():
    tok = WordTokenizer.fit("hello world, hello!", unknown="<unk>")
    assert tok.encode("hi world hi hello").tolist() == [2, 3, 7, 3, 2, 3, 6]
    assert tok.last_unknown_count == 2
