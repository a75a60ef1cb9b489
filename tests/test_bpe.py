"""Classic BPE: trainer and encoder vs the plain-loop twins, golden tie cases, files, errors."""

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine.errors import ConfigurationError, TokenizerError
from engine.tokenizers import BpeTokenizer, BpeTrainer, fit_tokenizer, load_tokenizer
from tests.naive_tokenizers import naive_bpe_vocab, naive_encode_bpe, naive_train_bpe


def test_golden_aaab_aab():
    # Words: "aaab" (rank 0), " " (1), "aab" (2). (a,a) counts 3; after it every pair counts 1
    # and the first occurrence decides: (aa,a) at (0,0), then (aaa,b) at (0,0), then (aa,b) at (2,0).
    tok = BpeTrainer(10).train("aaab aab")
    assert tok.merges == [("a", "a"), ("aa", "a"), ("aaa", "b"), ("aa", "b")]
    assert tok.history == [(0, 8), (1, 6), (2, 5), (3, 4), (4, 3)]
    assert tok.vocab_size == 2 + 3 + 4
    assert tok.tokenize("aab aaab") == ["aab", " ", "aaab"]
    assert tok.encode("aab aaab").tolist() == [8, 2, 7]


def test_tie_by_word_rank_then_offset():
    # One occurrence each: rank decides ("zy" is word 0), not the pieces' order.
    assert BpeTrainer(1).train("zy ab").merges == [("z", "y")]
    assert BpeTrainer(1, tie_break="hf").train("zy ab").merges == [("a", "b")]
    # Same word: the smaller offset wins.
    assert BpeTrainer(1).train("bcab").merges == [("b", "c")]
    assert BpeTrainer(1, tie_break="hf").train("bcab").merges == [("a", "b")]


def test_overlapping_pairs_merge_left_to_right():
    tok = BpeTrainer(1).train("aaaaa")
    assert tok.merges == [("a", "a")]
    assert tok.history == [(0, 5), (1, 3)]
    assert tok.tokenize("aaa") == ["aa", "a"]


def test_stops_when_no_pair_left():
    tok = BpeTrainer(50).train("ab ab a")
    assert tok.merges == [("a", "b")]
    assert tok.history == [(0, 7), (1, 5)]


def test_several_texts_are_one_stream_of_words():
    # Words never cross text edges: "ab" + "c" is two words, not "abc".
    tok = BpeTrainer(5).train(["ab", "c"])
    assert tok.merges == [("a", "b")]


def test_vocab_size_target():
    text = "the quick brown fox jumps over the lazy dog " * 3
    tok = BpeTrainer(vocab_size=40).train(text)
    assert tok.vocab_size == 40
    assert tok.merges == BpeTrainer(40 - 2 - len(set(text))).train(text).merges


def test_trainer_validation():
    with pytest.raises(ConfigurationError, match="merges must be a non-negative integer, got -1"):
        BpeTrainer(-1)
    with pytest.raises(ConfigurationError, match="give merges=N or vocab_size=V"):
        BpeTrainer()
    with pytest.raises(ConfigurationError, match="give merges=N or vocab_size=V, not both"):
        BpeTrainer(5, vocab_size=10)
    with pytest.raises(ConfigurationError, match="BPE level 'word' is unknown"):
        BpeTrainer(5, level="word")
    with pytest.raises(ConfigurationError, match="BPE tie_break 'random' is unknown"):
        BpeTrainer(5, tie_break="random")
    with pytest.raises(ConfigurationError, match=r"vocab_size 3 is below specials \+ training characters \(5\)"):
        BpeTrainer(vocab_size=3).train("abc")
    with pytest.raises(TokenizerError, match="the training text is empty"):
        BpeTrainer(5).train("")
    with pytest.raises(ConfigurationError, match="tokenizer kind 'sentencepiece' is unknown"):
        fit_tokenizer("sentencepiece", "abc")


def test_unknown_character_error():
    tok = BpeTrainer(3).train("abc abc")
    with pytest.raises(TokenizerError) as info:
        tok.encode_document("abc aXc", document_id="play")
    message = str(info.value)
    assert "'X'" in message and "U+0058" in message and "offset 5" in message and "'play'" in message
    with pytest.raises(TokenizerError, match=r"offset 2 of document 'second'"):
        tok.encode_documents(["abc", "a X"], ["first", "second"])


def test_file_round_trip_and_corruption(tmp_path):
    tok = BpeTrainer(6).train("low lower lowest newer wider")
    path = tok.save(tmp_path / "bpe.json")
    again = load_tokenizer(path)
    assert isinstance(again, BpeTokenizer)
    assert again.hash == tok.hash and again.merges == tok.merges and again.history == tok.history
    text = "lower newest"
    assert again.encode(text).tolist() == tok.encode(text).tolist()
    data = json.loads(path.read_text())
    data["payload"]["merges"][0] = ["w", "o"]
    path.write_text(json.dumps(data))
    with pytest.raises(TokenizerError, match="corrupt"):
        load_tokenizer(path)


def test_merges_must_be_buildable():
    with pytest.raises(TokenizerError, match="merge 0"):
        BpeTokenizer("ab", [("ab", "b")])


def test_encode_documents_wraps_each():
    tok = BpeTrainer(4).train("hello world hello")
    texts = ["hello", "", "world hello"]
    values, offsets = tok.encode_documents(texts)
    assert values.tolist() == np.concatenate([tok.encode_document(t) for t in texts]).tolist()
    assert offsets.tolist()[:3] == [0, len(tok.encode("hello")) + 2, len(tok.encode("hello")) + 4]


SMALL = st.sampled_from(["ab", "ab ", "abc  ", "aab.", "a", "xé y\n"])


@settings(max_examples=150, deadline=None)
@given(
    SMALL.flatmap(lambda alphabet: st.lists(st.text(alphabet=alphabet, max_size=40), min_size=1, max_size=3)),
    st.integers(0, 25),
    st.sampled_from(["first", "hf"]),
    st.data(),
)
def test_trainer_and_encoder_match_naive(texts, merges, tie_break, data):
    if not "".join(texts):
        return
    tok = BpeTrainer(merges, tie_break=tie_break).train(texts)
    alphabet, naive_merges, naive_history = naive_train_bpe(texts, merges, tie_break)
    assert tok.alphabet == alphabet
    assert tok.merges == naive_merges
    assert tok.history == naive_history
    probe = data.draw(st.text(alphabet=alphabet, max_size=40))
    pieces = naive_encode_bpe(probe, alphabet, naive_merges)
    vocab = naive_bpe_vocab(alphabet, naive_merges)
    assert tok.tokenize(probe) == pieces
    assert tok.encode(probe).tolist() == [vocab[p] for p in pieces]
    assert tok.decode(tok.encode_document(probe)) == probe


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1, max_size=80), st.integers(0, 15))
def test_mixed_scripts_match_naive(text, merges):
    tok = BpeTrainer(merges).train(text)
    _, naive_merges, naive_history = naive_train_bpe(text, merges)
    assert tok.merges == naive_merges and tok.history == naive_history
    assert tok.tokenize(text) == naive_encode_bpe(text, tok.alphabet, naive_merges)
    assert tok.decode(tok.encode(text)) == text


def test_shakespeare_matches_naive(shakespeare_text):
    cut = int(len(shakespeare_text) * 0.9)
    train, validation = shakespeare_text[:cut], shakespeare_text[cut:]
    tok = BpeTrainer(200).train(train)
    alphabet, merges, history = naive_train_bpe(train[:300_000], 200)
    assert BpeTrainer(200).train(train[:300_000]).merges == merges
    assert len(tok.merges) == 200 and tok.history[0] == (0, len(train))
    assert tok.merges[0] == ("t", "h")
    assert all(a >= b for (_, a), (_, b) in zip(tok.history, tok.history[1:]))
    validation = "".join(ch for ch in validation if ch in tok.alphabet)
    assert tok.tokenize(validation) == naive_encode_bpe(validation, tok.alphabet, tok.merges)
    assert tok.decode(tok.encode(validation)) == validation


def test_shakespeare_hf_tie_break_matches_hugging_face(shakespeare_text):
    tokenizers = pytest.importorskip("tokenizers", reason="needs the bench extra (pip install -e '.[bench]')")
    text = shakespeare_text[:200_000]
    alphabet = sorted(set(text))
    hf = tokenizers.Tokenizer(tokenizers.models.BPE())
    hf.pre_tokenizer = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(r"\w+|[^\w\s]|\s"), behavior="isolated"
    )
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=len(alphabet) + 100 + 2, special_tokens=["<bos>", "<eos>"],
        initial_alphabet=alphabet, show_progress=False,
    )
    hf.train_from_iterator([text], trainer=trainer)
    hf_merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in json.loads(hf.to_str())["model"]["merges"]]
    assert BpeTrainer(100, tie_break="hf").train(text).merges == hf_merges


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n_merges=st.integers(0, 12), length=st.integers(0, 90))
def test_merge_word_both_rules_match_naive(data, n_merges, length):
    """The shared merge core, both rules and both paths, on merge lists that rebuild pieces; and the
    byte-level encoders' ``merge_short_first`` (merge positions and token ranks as priorities)."""
    from engine.kernels.bpe_encode import build_pair_table, merge_word
    from engine.kernels.bpe_merge import first_entry_table, merge_short_first
    from tests.naive_byte_bpe import naive_encode_merges
    from tests.naive_tokenizers import merge_word as naive_merge

    texts = ["a", "b", "c"]
    merges = []
    for _ in range(n_merges):
        left, right = data.draw(st.sampled_from(texts)), data.draw(st.sampled_from(texts))
        merges.append((left, right))
        if left + right not in texts:
            texts.append(left + right)
    symbol = {t: i for i, t in enumerate(texts)}
    lefts = np.array([symbol[a] for a, _ in merges], dtype=np.int64)
    rights = np.array([symbol[b] for _, b in merges], dtype=np.int64)
    made = np.array([symbol[a + b] for a, b in merges], dtype=np.int64)
    priorities = np.arange(len(merges), dtype=np.int64)
    table = (*build_pair_table(lefts, rights), lefts, rights, made, priorities)
    word = data.draw(st.lists(st.sampled_from("abc"), min_size=length, max_size=length))
    ordered = list(word)
    for a, b in merges:
        ordered = naive_merge(ordered, a, b)
    first_entry = {}
    for k, (a, b) in enumerate(merges):
        first_entry.setdefault((symbol[a], symbol[b]), (k, symbol[a + b]))
    unordered = naive_encode_merges(bytes(symbol[c] for c in word), list(range(256)), first_entry)
    for rule, expected in ((True, [symbol[p] for p in ordered]), (False, unordered)):
        for long_word in (0, 1 << 40):
            parts = np.array([symbol[c] for c in word], dtype=np.int64)
            scratch = np.empty(max(length, 1), dtype=np.int64)
            kept = merge_word(parts, length, long_word, rule, *table, scratch)
            assert parts[:kept].tolist() == expected, (rule, long_word)
    # the byte-level encoders' merge: each pair's first entry, one row per pair
    parts = np.array([symbol[c] for c in word], dtype=np.int64)
    kept = merge_short_first(parts, length, first_entry_table(table[0], made, priorities),
                             np.empty(max(length, 1), dtype=np.int64))
    assert parts[:kept].tolist() == unordered
    # tiktoken's priorities: the rank of the token made, so pairs that make one token tie (leftmost wins)
    ranks = {}
    for k, (a, b) in enumerate(merges):
        ranks.setdefault((symbol[a], symbol[b]), (symbol[a + b], symbol[a + b]))
    parts = np.array([symbol[c] for c in word], dtype=np.int64)
    kept = merge_short_first(parts, length, first_entry_table(table[0], made, made),
                             np.empty(max(length, 1), dtype=np.int64))
    assert parts[:kept].tolist() == naive_encode_merges(bytes(symbol[c] for c in word), list(range(256)), ranks)


# -- enormous documents ---------------------------------------------------------------------------


def test_one_megabyte_single_word_through_bpe(shakespeare_text):
    import re

    bpe = BpeTrainer(300).train(shakespeare_text)
    letters = re.sub(r"[^A-Za-z]", "", shakespeare_text)[:1_000_000]
    for word in ("ab" * 500_000, letters, "th" * 500_000):
        ids = bpe.encode(word)
        assert bpe.decode(ids) == word
    assert bpe.encode(letters).shape[0] < 0.6 * len(letters)


# -- long words: the heap path equals the scan -------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(alphabet=st.sampled_from(["ab", "abc", "abcd", "aab"]), seed=st.integers(0, 2**32 - 1),
       merges=st.integers(0, 40), length=st.integers(1, 400))
def test_long_word_heap_path_equals_the_scan(alphabet, seed, merges, length):
    from engine.kernels.bpe_encode import encode_words, map_symbols
    from engine.tokenizers.word import analyse_words

    rng = random.Random(seed)
    train = "".join(rng.choice(alphabet + "  ") for _ in range(300)).strip() or alphabet
    tok = BpeTrainer(merges).train(train)
    word = "".join(rng.choice(tok.alphabet.replace(" ", "") or "a") for _ in range(length))
    analysis = analyse_words([word])
    symbols, unknown = map_symbols(analysis.word_cps, tok._char_table)
    assert unknown < 0
    args = (symbols, analysis.word_offsets, *tok._merge_table, tok._left, tok._right, tok._made, tok._priorities)
    heap_pieces, heap_offsets = encode_words(*args, 0)
    scan_pieces, scan_offsets = encode_words(*args, 1 << 40)
    assert heap_pieces.tolist() == scan_pieces.tolist() and heap_offsets.tolist() == scan_offsets.tolist()
    assert tok.decode(tok.encode(word)) == word


def test_bpe_tie_rule_orders_by_word_rank_then_offset():
    # (a,b) first occurs in word 0 at offset 1; (b,a) only in word 3 though more often there.
    tok = BpeTrainer(3).train("cab ab ba ba")
    assert tok.merges == [("a", "b"), ("b", "a"), ("c", "ab")]
    assert tok.history == [(0, 12), (1, 10), (2, 8), (3, 7)]


def test_bpe_replaces_left_to_right_without_overlap():
    tok = BpeTokenizer(" a", [("a", "a")])
    assert tok.tokenize("aaaa aaa") == ["aa", "aa", " ", "aa", "a"]
    assert tok.encode("aaaa aaa").tolist() == [4, 4, 2, 4, 3]
