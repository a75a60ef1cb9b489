"""One byte-level piece longer than PieceCacheLimits.long_piece_window bytes is merged window by window
(engine.kernels.bpe_merge._merge_windowed): the ids equal the plain-loop twin's and the whole-piece
merge's, for trained vocabularies and for random ranks that are not monotone in merges; a cut that
cannot be certified falls back to the whole piece."""

import random

import numpy as np
import pytest

import copy

import engine.kernels.bpe_merge as bpe_merge
from engine.tokenizers.byte_bpe import ByteBpeTrainer
from engine.tokenizers.limits import PieceCacheLimits
from tests.test_bpe_encode import naive_rank_ids, random_rank_tokenizer


def windowed(tok, piece: bytes, window: int):
    """``_merge_windowed`` on ``piece`` alone: (ids or -1, the out buffer)."""
    pairs, nexts, _, _, made, priorities, _, _ = tok._encoder()
    out = np.array([tok._byte_ids[b] for b in piece], dtype=np.uint32)
    parts = np.empty(window, dtype=np.int64)
    m = bpe_merge._merge_windowed(out, 0, len(piece), window, parts, pairs, nexts, made, priorities,
                                  tok._token_lengths, 0)
    return m, out


def with_window(tok, window: int):
    """The same tokenizer, merging pieces longer than ``window`` bytes window by window."""
    windowed_tok = copy.copy(tok)
    windowed_tok.cache = PieceCacheLimits(long_piece_window=window)
    windowed_tok._piece_caches = []
    return windowed_tok


def whole(tok, text: str) -> list[int]:
    """The ids with every piece merged at once (the window above any piece)."""
    return with_window(tok, 1 << 40).encode(text).tolist()


@pytest.mark.parametrize("whole_piece_first", [True, False])
@pytest.mark.parametrize("window", [16, 65, 300])
def test_random_ranks_match_naive_window_by_window(whole_piece_first, window):
    certified = 0
    for seed in range(12):
        tok, ranks = random_rank_tokenizer(seed, whole_piece_first)
        tok = with_window(tok, window)
        rng = random.Random(seed)
        words = ["".join(rng.choice("ab") for _ in range(rng.randint(window + 1, 8 * window))) for _ in range(3)]
        words += ["ab" * (3 * window), "a" * (5 * window + 3), "!" * (2 * window + 1)]
        text = " ".join(words)
        assert tok.encode(text).tolist() == naive_rank_ids(text, ranks, whole_piece_first)
        m, out = windowed(tok, words[0].encode(), window)
        if m >= 0:
            certified += 1
            assert out[:m].tolist() == naive_rank_ids(words[0], ranks, whole_piece_first)
    assert certified >= 6  # the windows are used, not only the fallback


@pytest.fixture(scope="module")
def trained():
    rng = random.Random(4)
    return ByteBpeTrainer(merges=120).train(["ab" * 300 + " " + "".join(rng.choice("abc") for _ in range(4000)),
                                             "x" * 200])


@pytest.mark.parametrize("piece", ["ab" * 20_000, "abc" * 9_000, "x" * 30_001,
                                   "".join(random.Random(8).choice("abc") for _ in range(40_000))])
def test_trained_pieces_are_certified_and_equal_the_whole_merge(trained, piece):
    longest = int(trained._token_lengths.max())
    m, out = windowed(trained, piece.encode(), 4 * longest + 64)
    assert m >= 0
    assert out[:m].tolist() == whole(trained, piece)


def test_an_uncertified_cut_leaves_the_piece_to_the_whole_merge(trained):
    piece = "ab" * 5_000  # tokens of up to 512 bytes: a window of 64 holds no token end in its first three quarters...
    m, out = windowed(trained, piece.encode(), 64)
    if m < 0:  # ...or its cuts join into longer tokens: either way the kernel leaves out as it was
        assert out.tolist() == [trained._byte_ids[b] for b in piece.encode()]
    assert with_window(trained, 64).encode(piece).tolist() == whole(trained, piece)


def test_long_pieces_among_documents_and_short_pieces(trained):
    rng = random.Random(11)
    documents = [" ".join(rng.choice(["ab" * rng.randint(1, 2000), "abc" * rng.randint(300, 900), "hello",
                                      "x" * rng.randint(700, 3000), ""]) for _ in range(rng.randint(1, 6)))
                 for _ in range(12)]
    values, offsets = with_window(trained, 700).encode_documents(documents)
    for d, document in enumerate(documents):
        assert values[offsets[d]:offsets[d + 1]].tolist() == [trained.bos_id] + whole(trained, document) + [
            trained.eos_id]


def test_a_merge_that_reaches_back_across_a_cut_is_caught():
    """Tokens ``a…ac`` of 2..201 bytes ranked shortest first: the final ``c`` absorbs the 200 ``a`` before
    it, right to left, across any cut a window made there; the join check sends the piece to the whole
    merge, so the ids stay the plain loop's."""
    from engine.tokenizers.byte_bpe import ByteBpeTokenizer
    from tests.naive_byte_bpe import naive_encode_ranks

    tokens = [bytes([b]) for b in range(256)] + [b"a" * k + b"c" for k in range(1, 201)]
    tok = ByteBpeTokenizer(tokens, specials={"<bos>": len(tokens), "<eos>": len(tokens) + 1},
                           whole_piece_first=False)
    ranks = {t: i for i, t in enumerate(tokens)}
    piece = b"a" * 1000 + b"c"
    expected = naive_encode_ranks(piece, ranks, False)
    assert expected == [ranks[b"a"]] * 800 + [ranks[b"a" * 200 + b"c"]]
    m, out = windowed(tok, piece, 64)
    assert m == -1 and out.tolist() == [tok._byte_ids[b] for b in piece]
    assert with_window(tok, 64).encode(piece.decode()).tolist() == expected
