"""Byte-level BPE: trainer vs its plain twin and vs Hugging Face; encoder kernels vs plain merging."""

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from engine.errors import ConfigurationError, TokenizerError
from engine.tokenizers.loading import load_tokenizer
from engine.tokenizers.byte_bpe import ByteBpeTokenizer, ByteBpeTrainer, bytes_to_unicode
from tests.naive_byte_bpe import naive_encode_merges, naive_pretokenize, naive_train, stdlib_texts

WORDS = ["aa", "ab", "ba", "abab", "aaa", "b", " a", " ab", "'s", "héé", "😀😀", "a1", "11", "  ", "\n", "x"]


def merge_bytes(tokenizer):
    return [(tokenizer.tokens[a], tokenizer.tokens[b]) for a, b in tokenizer.merges]


@pytest.mark.parametrize("tie_break", ["first", "hf"])
@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(WORDS), max_size=12).map("".join), min_size=1, max_size=6),
       new_tokens=st.integers(0, 25))
def test_trainer_matches_naive(tie_break, texts, new_tokens):
    tokenizer = ByteBpeTrainer(vocab_size=258 + new_tokens, tie_break=tie_break).train(texts)
    assert merge_bytes(tokenizer) == naive_train(texts, new_tokens, tie_break=tie_break)


def test_trainer_first_rule_exact_merges():
    # words "ab" x1, " ba" x2, " ab" x1: (a,b), (" ",b), (b,a) all count 2.
    # first rule: (a,b) occurs first (word 0); then (" ",b) at offset 0 of " ba" beats (b,a) at 1.
    tokenizer = ByteBpeTrainer(vocab_size=260).train(["ab ba ab ba"])
    assert merge_bytes(tokenizer) == [(b"a", b"b"), (b" ", b"b")]
    assert tokenizer.tokens[258] == b"ab" and tokenizer.tokens[259] == b" b"
    # hf rule: smaller ids win, and HF's byte alphabet sorts "a" < "b" < "Ġ" (the space, U+0120).
    hf = ByteBpeTrainer(vocab_size=260, tie_break="hf").train(["ab ba ab ba"])
    assert merge_bytes(hf) == [(b"a", b"b"), (b"b", b"a")]


def test_ids_layout_vocab_size_and_history():
    texts = stdlib_texts(100_000)
    trainer = ByteBpeTrainer(vocab_size=300)
    tokenizer = trainer.train(iter(texts))
    assert tokenizer.vocab_size == 300
    assert tokenizer.bos_id == 0 and tokenizer.eos_id == 1
    assert [tokenizer.tokens[2 + b] for b in (0, 65, 255)] == [b"\x00", b"A", b"\xff"]
    assert len(trainer.history) == len(tokenizer.merges) == 42
    assert trainer.history == sorted(trainer.history, reverse=True)
    assert trainer.initial_tokens == sum(len(t.encode()) for t in texts)
    assert trainer.history[-1] == sum(len(tokenizer.encode(t)) for t in texts)


def test_trainer_streams_many_batches(monkeypatch):
    from engine.tokenizers.byte_bpe import WordCounts
    from engine.tokenizers.limits import TrainLimits

    batches = []
    real_add = WordCounts.add
    monkeypatch.setattr(WordCounts, "add", lambda self, batch: batches.append(len(batch)) or real_add(self, batch))
    texts = stdlib_texts(300_000)
    streamed = ByteBpeTrainer(vocab_size=600, limits=TrainLimits(batch_bytes=1000)).train(t for t in texts)
    assert len(batches) > 5 and max(batches) < len(texts)  # a batch closes at 1000 bytes: many, of few texts
    batches.clear()
    whole = ByteBpeTrainer(vocab_size=600, limits=TrainLimits(batch_bytes=1 << 30)).train(texts)
    assert batches == [len(texts)]  # one batch
    assert streamed.merges == whole.merges and len(streamed.merges) == 342


def naive_word_counts(texts, pattern="gpt2"):
    counts = {}
    for text in texts:
        for piece in naive_pretokenize(text, pattern):
            key = piece.encode()
            counts[key] = counts.get(key, 0) + 1
    return list(counts), list(counts.values())  # first appearance order


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(WORDS + ["abcdefg", "abcdefgh", " abcdefg", "x" * 300, "\x00" * 9]),
                               max_size=30).map("".join), max_size=6))
def test_word_counts_match_counter(texts):
    # pieces of up to 7 bytes are their own key, longer ones compare bytes (and 300 > 255 bytes of length)
    words, counts = ByteBpeTrainer(merges=1).count_types(texts)
    assert (words, counts.tolist()) == naive_word_counts(texts)


def test_word_counts_grow_past_the_first_table():
    from engine.tokenizers.limits import TrainLimits

    texts = stdlib_texts(400_000) + [" ".join(f"w{i}" for i in range(40_000))]
    # many batches of 50 kB: the table and pool grow between them
    words, counts = ByteBpeTrainer(merges=1, limits=TrainLimits(batch_bytes=50_000)).count_types(texts)
    assert len(words) > 1 << 15  # past the initial 32k types
    assert (words, counts.tolist()) == naive_word_counts(texts)


@pytest.mark.parametrize("tie_break", ["first", "hf"])
def test_train_from_counts_equals_train(tie_break):
    texts = stdlib_texts(200_000)
    trainer = ByteBpeTrainer(vocab_size=500, tie_break=tie_break)
    table = trainer.count_words(texts)
    pool, starts = table.pool.tobytes(), table.starts[: table.total + 1].tolist()
    words = [pool[starts[w]:starts[w + 1]] for w in range(table.total)]
    whole = trainer.train(texts)
    history = trainer.history
    from_counts = ByteBpeTrainer(vocab_size=500, tie_break=tie_break).train_from_counts(words, table.counts[: table.total])
    assert from_counts.tokens == whole.tokens and from_counts.merges == whole.merges and len(whole.merges) == 242
    assert from_counts.to_json() == whole.to_json()
    counts_trainer = ByteBpeTrainer(vocab_size=500, tie_break=tie_break)
    counts_trainer.train_from_counts(words, list(table.counts[: table.total]))
    assert counts_trainer.history == history
    assert counts_trainer.initial_tokens == trainer.initial_tokens == sum(len(t.encode()) for t in texts)


def test_train_from_counts_small_and_errors():
    # " ab" x3 and "ab" x1: (a, b) counts 4, (" ", a) 3.
    tokenizer = ByteBpeTrainer(merges=5).train_from_counts([b" ab", b"ab"], [3, 1])
    assert merge_bytes(tokenizer) == [(b"a", b"b"), (b" ", b"ab")]
    assert merge_bytes(ByteBpeTrainer(merges=5).train_from_counts([], [])) == []
    trainer = ByteBpeTrainer(merges=5)
    with pytest.raises(TokenizerError, match="2 words but 1 counts"):
        trainer.train_from_counts([b"a", b"b"], [1])
    with pytest.raises(TokenizerError, match="word #1 is b'', expected non-empty bytes"):
        trainer.train_from_counts([b"a", b""], [1, 1])
    with pytest.raises(TokenizerError, match="word #0 is 'a', expected non-empty bytes"):
        trainer.train_from_counts(["a"], [1])
    with pytest.raises(TokenizerError, match="count 0 is below 1"):
        trainer.train_from_counts([b"a", b"b"], [1, 0])
    with pytest.raises(TokenizerError, match="counts must be one integer per word, got float64"):
        trainer.train_from_counts([b"a"], [2.5])


def test_trainer_options_errors():
    with pytest.raises(TokenizerError, match="vocab_size=100 is smaller"):
        ByteBpeTrainer(vocab_size=100)
    with pytest.raises(TokenizerError, match="tie_break"):
        ByteBpeTrainer(vocab_size=300, tie_break="last")
    with pytest.raises(TokenizerError, match="give merges=N or vocab_size=V"):
        ByteBpeTrainer()
    with pytest.raises(TokenizerError, match="training text 1, character offset 3"):
        ByteBpeTrainer(merges=3).train(["ok", "bad\udc80"])


@pytest.mark.parametrize("keyword, value", [("merges", "5"), ("merges", 2.5), ("merges", True), ("merges", -1),
                                            ("vocab_size", "300"), ("vocab_size", 300.0)])
def test_trainer_counts_must_be_integers(keyword, value):
    with pytest.raises(ConfigurationError) as caught:  # as for BpeTrainer: a bad argument, not a bad tokenizer
        ByteBpeTrainer(**{keyword: value})
    assert str(caught.value) == f"{keyword}={value!r}: expected an integer >= 0"


def test_trainer_counts_accept_numpy_integers():
    trainer = ByteBpeTrainer(np.int64(5), vocab_size=np.int32(300))
    assert (trainer.merges, trainer.vocab_size) == (5, 300)
    assert type(trainer.merges) is int and type(trainer.vocab_size) is int


def hf_merges(texts, vocab_size, pattern):
    tk = pytest.importorskip("tokenizers", reason="needs the bench extra (pip install -e '.[bench]')")
    Regex, Tokenizer, models, pre_tokenizers, trainers = tk.Regex, tk.Tokenizer, tk.models, tk.pre_tokenizers, tk.trainers

    from engine.tokenizers.pretokenize import PATTERNS

    tok = Tokenizer(models.BPE())
    if pattern == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(PATTERNS[pattern]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<bos>", "<eos>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return [tuple(m) for m in json.loads(tok.to_str())["model"]["merges"]]


def as_hf_strings(tokenizer):
    table = bytes_to_unicode()
    return [("".join(table[c] for c in a), "".join(table[c] for c in b)) for a, b in merge_bytes(tokenizer)]


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
def test_hf_tie_rule_matches_hf_trainer_on_shakespeare(pattern, shakespeare_text):
    ours = ByteBpeTrainer(vocab_size=2048, pattern=pattern, tie_break="hf").train([shakespeare_text])
    assert as_hf_strings(ours) == hf_merges([shakespeare_text], 2048, pattern)


def test_hf_tie_rule_matches_hf_trainer_on_stdlib():
    texts = stdlib_texts(3_000_000)
    ours = ByteBpeTrainer(vocab_size=4096, tie_break="hf").train(texts)
    theirs = hf_merges(texts, 4096, "gpt2")
    assert len(theirs) == 4096 - 258
    assert as_hf_strings(ours) == theirs


# -- encoder ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_tokenizer():
    return ByteBpeTrainer(vocab_size=700).train(stdlib_texts(400_000))


def naive_encode(tokenizer, text):
    merges = {}
    for k, (a, b) in enumerate(tokenizer.merges):
        merges.setdefault((a, b), (k, tokenizer.tokens.index(tokenizer.tokens[a] + tokenizer.tokens[b])))
    byte_ids = [tokenizer.tokens.index(bytes([b])) for b in range(256)]
    ids = []
    for piece in naive_pretokenize(text, tokenizer.pattern):
        ids += naive_encode_merges(piece.encode(), byte_ids, merges)
    return ids


TEXT_PARTS = st.sampled_from(["def ", "self", ".", "_", "return", " x", "\n    ", "aaaa", "é", "😀", "'s", "12", "\t",
                              "(", ")", ":", " ", "\r\n", "\x00", "中文"])


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(TEXT_PARTS, max_size=60))
def test_encode_matches_naive_and_round_trips(small_tokenizer, parts):
    text = "".join(parts)
    ids = small_tokenizer.encode(text)
    assert ids.dtype == np.uint32
    assert ids.tolist() == naive_encode(small_tokenizer, text)
    assert small_tokenizer.decode(ids) == text


def test_long_pieces_use_heap_merging_with_same_result(small_tokenizer):
    for text in ["a" * 5000, "ab" * 3000, "_" * 777, " " * 1000 + "x", "é" * 400, "selfself" * 300]:
        assert small_tokenizer.encode(text).tolist() == naive_encode(small_tokenizer, text)


def test_encode_batch_and_documents_independent_of_threads(small_tokenizer):
    texts = stdlib_texts(200_000) + ["", "x", "😀"]
    one = small_tokenizer.encode_batch(texts, threads=1)
    four = small_tokenizer.encode_batch(texts, threads=4)
    assert all(np.array_equal(a, b) for a, b in zip(one, four)) and len(one) == len(texts)
    assert all(np.array_equal(a, small_tokenizer.encode(t)) for a, t in zip(one, texts))
    values, offsets = small_tokenizer.encode_documents(texts, [str(i) for i in range(len(texts))], threads=3)
    assert values.dtype == np.uint32 and offsets.dtype == np.int64 and offsets[0] == 0
    for i, text in enumerate(texts):
        doc = values[offsets[i]:offsets[i + 1]]
        assert doc[0] == 0 and doc[-1] == 1 and np.array_equal(doc[1:-1], one[i])
    assert values[offsets[-4]:offsets[-3]].tolist() == [0, 1]  # the empty document


def test_lone_surrogate_names_offset_and_document(small_tokenizer):
    with pytest.raises(TokenizerError, match="character offset 3: lone surrogate U\\+DC00"):
        small_tokenizer.encode("abc\udc00")
    with pytest.raises(TokenizerError, match="document 'doc-7', character offset 0"):
        small_tokenizer.encode_documents(["ok", "\ud800x"], ["doc-6", "doc-7"])
    # many chunks on two threads: still the first document that holds one, at its offset
    texts = ["a" * 40_000] * 8 + ["ab\udfff"] + ["a" * 40_000] * 8 + ["\ud800"]
    ids = [f"doc-{i}" for i in range(len(texts))]
    with pytest.raises(TokenizerError, match="document 'doc-8', character offset 2: lone surrogate U\\+DFFF"):
        small_tokenizer.encode_documents(texts, ids, threads=2)


def test_decode_bytes_partial_and_bad_ids(small_tokenizer):
    ids = small_tokenizer.encode("😀")
    assert small_tokenizer.decode_bytes(ids[:1]) == "😀".encode()[:len(small_tokenizer.tokens[ids[0]])]
    assert small_tokenizer.decode([0, *ids.tolist(), 1]) == "😀"
    with pytest.raises(TokenizerError, match="id 700 at position 0 is outside the vocabulary"):
        small_tokenizer.decode([700])


def test_save_load_round_trip(small_tokenizer, tmp_path):
    path = small_tokenizer.save(tmp_path / "byte.json")
    again = load_tokenizer(path)
    assert isinstance(again, ByteBpeTokenizer) and again == small_tokenizer
    text = "def f(self):\n    return 42 # 😀"
    assert np.array_equal(again.encode(text), small_tokenizer.encode(text))
    assert small_tokenizer.tokenize("def x") == ["def", "Ġx"]


def test_vocabulary_must_hold_every_byte():
    with pytest.raises(TokenizerError, match="lacks the single byte 0x41"):
        ByteBpeTokenizer([bytes([b]) for b in range(65)], specials={"<bos>": 65, "<eos>": 66})


# -- byte-level tokenizer batches and ids, and oversized sampled batches ---------------------------


@pytest.fixture(scope="module")
def tiny_byte_bpe():
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    return ByteBpeTrainer(merges=5).train(["hello hello world"])


@pytest.mark.parametrize(
    "texts, ids, fragment",
    [
        (["a", 5], None, "expected"),
        ("ab", None, "texts is str, expected a list"),
        (["a", "b"], ["only-one"], "document"),
    ],
)
def test_byte_bpe_encode_documents_rejects_bad_batches(tiny_byte_bpe, texts, ids, fragment):
    with pytest.raises(TokenizerError, match=fragment):
        tiny_byte_bpe.encode_documents(texts, ids)


@pytest.mark.parametrize("ids, fragment", [([2**63], str(2**63)), ([1.5], "expected integer ids"), ([3, -1], "-1")])
def test_byte_bpe_decode_rejects_bad_ids(tiny_byte_bpe, ids, fragment):
    with pytest.raises(TokenizerError, match=re.escape(fragment)):
        tiny_byte_bpe.decode(ids)
