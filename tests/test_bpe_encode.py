"""Byte-level encode kernels against their plain-loop twins (tests/naive_byte_bpe.py): the piece key,
the table of pieces that are their own token, the per-call piece cache (hits, eviction, pieces over
its length limit), long pieces with non-monotone ranks, and tiktoken's ids on the three corpora."""

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.kernels.bpe_encode import LONG_WORD, MAX_CACHED_PIECE, piece_key, self_merging_tokens
from engine.tokenizers.byte_bpe import ByteBpeTokenizer, ByteBpeTrainer
from engine.tokenizers.limits import PieceCacheLimits, WordCacheLimits
from engine.tokenizers.pretokenize import PATTERNS
from tests.naive_byte_bpe import (naive_encode_merges, naive_encode_ranks, naive_piece_key, naive_pretokenize,
                                  naive_self_merging, stdlib_texts)


@settings(max_examples=200, deadline=None)
@given(piece=st.binary(min_size=1, max_size=40), before=st.integers(0, 9), after=st.integers(0, 9))
def test_piece_key_matches_naive_anywhere_in_the_buffer(piece, before, after):
    buf = np.frombuffer(b"\x01" * before + piece + b"\x02" * after, dtype=np.uint8)
    assert int(piece_key(buf, before, len(piece))) == naive_piece_key(piece)


def test_piece_keys_of_short_pieces_are_exact():
    pieces = [b"a", b"a\x00", b"\x00a", b"ab", b"abcdefg", b"\x00" * 7, b"\xff" * 7]
    keys = {naive_piece_key(p) for p in pieces}
    assert len(keys) == len(pieces) and 0 not in keys


def random_rank_tokenizer(seed: int, whole_piece_first: bool) -> tuple[ByteBpeTokenizer, dict[bytes, int]]:
    """All 256 bytes plus random strings over "ab", ids shuffled: ranks that are not monotone in merges."""
    rng = random.Random(seed)
    extra = {"".join(rng.choice("ab") for _ in range(rng.randint(2, 7))).encode() for _ in range(40)}
    tokens = [bytes([b]) for b in range(256)] + sorted(extra)
    rng.shuffle(tokens)
    tok = ByteBpeTokenizer(tokens, specials={"<bos>": len(tokens), "<eos>": len(tokens) + 1},
                           whole_piece_first=whole_piece_first)
    return tok, {t: i for i, t in enumerate(tokens)}


def naive_rank_ids(text: str, ranks: dict[bytes, int], whole_piece_first: bool) -> list[int]:
    return [i for piece in naive_pretokenize(text, "gpt2") for i in naive_encode_ranks(piece.encode(), ranks,
                                                                                          whole_piece_first)]


@pytest.mark.parametrize("whole_piece_first", [True, False])
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), words=st.lists(st.text("ab", min_size=1, max_size=400), max_size=6))
def test_random_ranks_short_and_long_pieces_match_naive(whole_piece_first, seed, words):
    tok, ranks = random_rank_tokenizer(seed, whole_piece_first)
    text = " ".join(words)
    assert tok.encode(text).tolist() == naive_rank_ids(text, ranks, whole_piece_first)


def test_long_pieces_past_every_limit_match_naive():
    tok, ranks = random_rank_tokenizer(7, True)
    rng = random.Random(3)
    for length in (LONG_WORD - 1, LONG_WORD, LONG_WORD + 1, MAX_CACHED_PIECE + 1, 3000):
        word = "".join(rng.choice("ab") for _ in range(length))
        text = f"{word} {word} x{word}"  # the same long piece twice: past MAX_CACHED_PIECE it is merged twice
        assert tok.encode(text).tolist() == naive_rank_ids(text, ranks, True)
    assert tok.encode("a" * 20000).tolist() == naive_rank_ids("a" * 20000, ranks, True)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), layout=st.lists(st.lists(st.sampled_from([0, 1, 2, 3]), max_size=5), min_size=1,
                                                       max_size=5))
def test_long_pieces_anywhere_in_a_batch_match_naive(seed, layout):
    """Pieces of LONG_WORD + 1 symbols and more, written unmerged by the first pass and merged by the
    second (merge_long_pieces), at the start and end of documents, side by side and between short ones."""
    tok, ranks = random_rank_tokenizer(seed, False)
    rng = random.Random(seed)
    pieces = {0: lambda: "".join(rng.choice("ab") for _ in range(rng.randint(1, 9))),
              1: lambda: "".join(rng.choice("ab") for _ in range(rng.randint(LONG_WORD + 1, 3 * LONG_WORD))),
              2: lambda: "!" * rng.randint(LONG_WORD - 1, LONG_WORD + 2), 3: lambda: " " * rng.randint(1, 90)}
    documents = ["".join(pieces[kind]() for kind in kinds) for kinds in layout]
    values, offsets = tok.encode_documents(documents)
    for d, document in enumerate(documents):
        assert values[offsets[d]:offsets[d + 1]].tolist() == ([tok.bos_id] + naive_rank_ids(document, ranks, False)
                                                              + [tok.eos_id])


@pytest.fixture(scope="module")
def trained():
    return ByteBpeTrainer(vocab_size=600).train(stdlib_texts(200_000))


def merges_of(tok):
    merges = {}
    for k, (a, b) in enumerate(tok.merges):
        merges.setdefault((a, b), (k, tok.tokens.index(tok.tokens[a] + tok.tokens[b])))
    return merges


def test_self_merging_tokens_match_naive(trained):
    byte_ids = [trained.tokens.index(bytes([b])) for b in range(256)]
    merges = merges_of(trained)
    got = self_merging_tokens(trained._token_pool, trained._token_offsets, trained._byte_ids, *trained._encoder()[:6])
    want = naive_self_merging(trained.tokens, lambda piece: naive_encode_merges(piece, byte_ids, merges),
                              MAX_CACHED_PIECE)
    assert got.tolist() == want + [False] * (len(got) - len(want))
    for seed in (1, 2):
        tok, ranks = random_rank_tokenizer(seed, False)
        got = self_merging_tokens(tok._token_pool, tok._token_offsets, tok._byte_ids, *tok._encoder()[:6])
        want = naive_self_merging(tok.tokens, lambda piece: naive_encode_ranks(piece, ranks, False), MAX_CACHED_PIECE)
        assert got.tolist() == want + [False] * (len(got) - len(want))


def test_tokens_longer_than_the_table_limit_still_encode_as_themselves():
    """A token of more than MAX_CACHED_PIECE bytes is not in the direct table; its piece goes through the
    long-piece pass and still comes out as that one token."""
    tokens = [bytes([b]) for b in range(256)] + [b"a" * (1 << k) for k in range(1, 9)]  # up to 256 a's
    tok = ByteBpeTokenizer(tokens, specials={"<bos>": len(tokens), "<eos>": len(tokens) + 1}, whole_piece_first=False)
    ranks = {t: i for i, t in enumerate(tokens)}
    wanted = self_merging_tokens(tok._token_pool, tok._token_offsets, tok._byte_ids, *tok._encoder()[:6])
    assert [i for i in range(len(tokens)) if wanted[i]] == [256 + k for k in range(6)]  # 2..64 bytes
    for length in (64, 65, 128, 200, 256, 300):
        text = "a" * length + " " + "a" * length
        assert tok.encode(text).tolist() == naive_rank_ids(text, ranks, False)
    assert tok.encode("a" * 256).tolist() == [263]


@pytest.mark.parametrize("slots, pool_bytes, pool_ids", [(64, 1 << 20, 1 << 18), (1 << 16, 1 << 20, 1 << 18),
                                                       (1 << 16, 40, 1 << 18), (1 << 16, 1 << 20, 12)])
def test_piece_cache_hits_and_eviction_give_the_same_ids(trained, slots, pool_bytes, pool_ids):
    """Many distinct pieces that are no token, repeated: hits, and with 64 slots (or pools of a few
    pieces) many evictions; the cache outlives a call, so later calls start from what earlier ones
    (of other texts, on other threads) left in it."""
    cache = PieceCacheLimits(slots=slots, pool_bytes=pool_bytes, pool_ids=pool_ids)
    trained = ByteBpeTokenizer(trained.tokens, merges=trained.merges, specials=trained.specials,
                               pattern=trained.pattern, cache=cache)  # the same tokenizer, caches of these sizes
    assert trained.cache == cache and trained._piece_caches == []
    rng = random.Random(5)
    words = ["".join(rng.choice("qxzjkvwy") for _ in range(rng.randint(2, 12))) for _ in range(300)]
    long_word = "zq" * (MAX_CACHED_PIECE // 2 + 20)
    text = " ".join(rng.choice(words + [long_word]) for _ in range(5000))
    byte_ids = [trained.tokens.index(bytes([b])) for b in range(256)]
    merges = merges_of(trained)

    def naive(t):
        return [i for piece in naive_pretokenize(t, "gpt2") for i in naive_encode_merges(piece.encode(), byte_ids, merges)]

    want = naive(text)
    assert trained.encode(text).tolist() == want
    assert trained.encode(text).tolist() == want  # from a filled cache
    other = " ".join(w[::-1] + "k" for w in words)  # pieces that share keys' lengths, not bytes
    assert trained.encode(other).tolist() == naive(other)
    assert trained.encode(text).tolist() == want
    documents = [text[:7000], text[7000:], other, text[:7000]]
    assert [ids.tolist() for ids in trained.encode_batch(documents, threads=2)] == [naive(d) for d in documents]
    assert 1 <= len(trained._piece_caches) <= 2  # one per thread that ran, idle again
    table, _, _, state = trained._piece_caches[0]
    assert table.shape == (slots, 4) and 0 < state[0] <= slots * 3 // 4
    assert state[1] <= pool_bytes and state[2] <= pool_ids


def test_clear_piece_caches_starts_them_afresh(trained):
    """After ``clear_piece_caches`` an encode meets every piece as new: its caches hold exactly what a
    fresh tokenizer's hold after the same encode, and the ids are the same."""
    import pickle

    text = "zqxj kvwy zqxj wyvk qqxz " * 3
    fresh = pickle.loads(pickle.dumps(trained))  # no caches yet
    want = fresh.encode(text).tolist()
    (table, _, ids_pool, state), = fresh._piece_caches
    first_state, first_rows = state.tolist(), table[table[:, 0] != 0].tolist()
    assert first_state[0] > 0
    trained.encode("other pieces: kvwq zzqx xjqv")
    trained.encode(text)
    trained.clear_piece_caches()
    for cache_table, _, _, cache_state in trained._piece_caches:
        assert not cache_table.any() and cache_state.tolist() == [0, 0, 0]
    assert trained.encode(text).tolist() == want
    used = [c for c in trained._piece_caches if c[3][0]]
    assert len(used) == 1 and used[0][3].tolist() == first_state
    assert used[0][0][used[0][0][:, 0] != 0].tolist() == first_rows
    assert used[0][2][:first_state[2]].tolist() == ids_pool[:first_state[2]].tolist()


def test_a_pickled_tokenizer_carries_no_piece_cache(trained):
    import pickle

    trained.encode("zqxj kvwy zqxj")
    assert trained._piece_caches
    copy = pickle.loads(pickle.dumps(trained))
    assert copy._piece_caches == [] and trained._piece_caches
    assert copy.encode("zqxj kvwy zqxj").tolist() == trained.encode("zqxj kvwy zqxj").tolist()


def multilingual_texts() -> list[str]:
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "corpus.jsonl"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
def test_same_ids_as_tiktoken_on_the_three_corpora(shakespeare_text, pattern):
    tiktoken = pytest.importorskip("tiktoken", reason="needs the bench extra (pip install -e '.[bench]')")
    stdlib = stdlib_texts(150_000)
    shakespeare = [shakespeare_text[:150_000]]
    multilingual = multilingual_texts()
    tok = ByteBpeTrainer(vocab_size=1500, pattern=pattern).train(stdlib + shakespeare + multilingual)
    ranks = {t: i for i, t in enumerate(tok.tokens) if t is not None}
    enc = tiktoken.Encoding("t", pat_str=PATTERNS[pattern], mergeable_ranks=ranks, special_tokens={})
    for texts in (stdlib, shakespeare, multilingual):
        assert [ids.tolist() for ids in tok.encode_batch(texts)] == [enc.encode_ordinary(t) for t in texts]


# -- character-level BPE: one kernel with a cache of merged words -------------------------------
@pytest.mark.parametrize("slots", [64, 1 << 16])
def test_word_cache_hits_eviction_and_long_words_match_naive(monkeypatch, slots):
    import engine.tokenizers.bpe as bpe_module
    from engine.tokenizers import BpeTrainer
    from engine.tokenizers.bpe import BpeTokenizer
    from tests.naive_tokenizers import naive_bpe_vocab, naive_encode_bpe

    limits = []
    real_kernel = bpe_module.encode_word_documents

    def kernel(*args):  # the cache limit each call hands the kernel (its 9th argument)
        limits.append(args[8])
        return real_kernel(*args)

    monkeypatch.setattr(bpe_module, "encode_word_documents", kernel)
    rng = random.Random(11)
    words = ["".join(rng.choice("abcdeé") for _ in range(rng.randint(1, 9))) for _ in range(400)]
    long_word = "abcab" * (MAX_CACHED_PIECE // 5 + 3)  # past the cache's length limit: merged at each occurrence
    text = " ".join(rng.choice(words + [long_word]) for _ in range(3000)) + ", ok!\n"
    trained = BpeTrainer(60).train(text[:20_000])
    tok = BpeTokenizer(trained.alphabet, trained.merges, trained.history, cache=WordCacheLimits(slots=slots))
    assert tok.hash == trained.hash  # the cache's size is no part of the tokenizer
    vocab = naive_bpe_vocab(tok.alphabet, tok.merges)
    assert tok.encode(text).tolist() == [vocab[p] for p in naive_encode_bpe(text, tok.alphabet, tok.merges)]
    documents = [text[:5000], "", text[5000:9000], text[:5000]]
    values, offsets = tok.encode_documents(documents)
    for d, document in enumerate(documents):
        assert values[offsets[d]:offsets[d + 1]].tolist() == [0] + tok.encode(document).tolist() + [1]
    assert limits and set(limits) == {slots}  # every call ran with this tokenizer's cache size


def test_word_encoder_names_the_first_unknown_character():
    from engine.errors import TokenizerError
    from engine.tokenizers import BpeTrainer

    tok = BpeTrainer(5).train("abc abc cab")
    for document, offset in (("abc abX", 6), ("Xab", 0), ("ab cXc", 4), ("abc Y", 4)):
        with pytest.raises(TokenizerError, match=f"offset {offset}"):
            tok.encode_documents(["abc", document], ["first", "second"])
    long = "abc" * LONG_WORD  # a long word before the unknown character: still its offset
    with pytest.raises(TokenizerError, match=f"offset {len(long) + 3}"):
        tok.encode_documents([long, long + " abX"], ["first", "second"])
    with pytest.raises(TokenizerError, match=f"offset {len(long) - 1}"):
        tok.encode_documents([long[:-1] + "Z"])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), layout=st.lists(st.lists(st.sampled_from([0, 1, 2]), max_size=5), min_size=1,
                                                       max_size=5))
def test_word_encoder_long_words_anywhere_in_a_batch_match_naive(seed, layout):
    """Words of more than LONG_WORD characters (merged in the second pass) at document edges, side by side
    (separated by one space) and between short words, in documents of one call."""
    from engine.tokenizers import BpeTrainer
    from tests.naive_tokenizers import naive_bpe_vocab, naive_encode_bpe

    rng = random.Random(seed)
    words = {0: lambda: "".join(rng.choice("abcé") for _ in range(rng.randint(1, 9))),
             1: lambda: "".join(rng.choice("abcé") for _ in range(rng.randint(LONG_WORD + 1, 3 * LONG_WORD))),
             2: lambda: "".join(rng.choice("abcé") for _ in range(rng.randint(LONG_WORD - 1, LONG_WORD + 1)))}
    documents = [" ".join(words[kind]() for kind in kinds) for kinds in layout]
    tok = BpeTrainer(40).train("abcé cab ébac " * 20 + "".join(documents))
    vocab = naive_bpe_vocab(tok.alphabet, tok.merges)
    values, offsets = tok.encode_documents(documents)
    for d, document in enumerate(documents):
        want = [vocab[p] for p in naive_encode_bpe(document, tok.alphabet, tok.merges)]
        assert values[offsets[d]:offsets[d + 1]].tolist() == [0] + want + [1]
