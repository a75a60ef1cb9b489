"""pytest-benchmark: byte-level BPE encode and train, engine beside tiktoken and HF in one run.

Run: ``pytest bench/bench_byte_bpe.py --benchmark-only``. Uses 3 MB of the standard library and
a 4,096 vocabulary so it finishes in seconds (also on Tiny Shakespeare and the en/el/ru corpus,
each text once); ``python bench/peers_byte_bpe.py`` runs full size. As there, every encode round
is one pass over text the encoder has not met: its piece caches emptied and a warm-up on other
text first (untimed, ``peers_byte_bpe.unseen``); tiktoken keeps no cache and gets the same warm-up.
"""

import os

import pytest

from peers_byte_bpe import multilingual_texts, stdlib_texts, trained_tokenizer, unseen
from engine.tokenizers.byte_bpe import ByteBpeTrainer
from engine.tokenizers.pretokenize import PATTERNS

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROUNDS = 5


@pytest.fixture(scope="module")
def corpus():
    return stdlib_texts(3_000_000)


@pytest.fixture(scope="module")
def tokenizer(corpus):
    tok = trained_tokenizer(corpus, 4096, "quick")
    tok.encode_batch(corpus[:3])  # compile before timing
    return tok


def tiktoken_of(tokenizer):
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {t: i for i, t in enumerate(tokenizer.tokens) if t is not None}
    return tiktoken.Encoding("bench", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks, special_tokens={})


def once(benchmark, fn, setup, rounds=ROUNDS):
    """``rounds`` timed calls of ``fn``, each after an untimed ``setup`` (its result dropped:
    pytest-benchmark would take it for the call's arguments)."""
    def before():
        setup()

    benchmark.pedantic(fn, setup=before, rounds=rounds, iterations=1)


@pytest.fixture(scope="module")
def other_corpora(shakespeare_text):
    return {"shakespeare": [shakespeare_text], "multilingual": multilingual_texts()}


@pytest.fixture(scope="module")
def warmups(shakespeare_text):
    """Other text to warm up on before each corpus (as in peers_byte_bpe)."""
    first_megabyte = stdlib_texts(1_000_000)
    return {"stdlib": [shakespeare_text], "shakespeare": first_megabyte, "multilingual": first_megabyte}


@pytest.mark.benchmark(group="encode-1-thread")
def test_engine_encode(benchmark, tokenizer, corpus, warmups):
    once(benchmark, lambda: tokenizer.encode_batch(corpus, threads=1), unseen(tokenizer, warmups["stdlib"]))


@pytest.mark.benchmark(group="encode-1-thread")
def test_tiktoken_encode_ordinary(benchmark, tokenizer, corpus, warmups):
    enc = tiktoken_of(tokenizer)
    once(benchmark, lambda: [enc.encode_ordinary(t) for t in corpus],
         lambda: [enc.encode_ordinary(t) for t in warmups["stdlib"]])


@pytest.mark.parametrize("name", ["shakespeare", "multilingual"])
@pytest.mark.benchmark(group="encode-1-thread-other-corpora")
def test_engine_encode_other_corpora(benchmark, tokenizer, other_corpora, warmups, name):
    texts = other_corpora[name]
    assert [a.tolist() for a in tokenizer.encode_batch(texts)] == [tiktoken_of(tokenizer).encode_ordinary(t)
                                                                   for t in texts]
    once(benchmark, lambda: tokenizer.encode_batch(texts, threads=1), unseen(tokenizer, warmups[name]),
         rounds=ROUNDS if name == "shakespeare" else 10 * ROUNDS)


@pytest.mark.parametrize("name", ["shakespeare", "multilingual"])
@pytest.mark.benchmark(group="encode-1-thread-other-corpora")
def test_tiktoken_encode_other_corpora(benchmark, tokenizer, other_corpora, warmups, name):
    enc = tiktoken_of(tokenizer)
    texts, warmup = other_corpora[name], warmups[name]
    once(benchmark, lambda: [enc.encode_ordinary(t) for t in texts], lambda: [enc.encode_ordinary(t) for t in warmup],
         rounds=ROUNDS if name == "shakespeare" else 10 * ROUNDS)


@pytest.mark.benchmark(group="encode-all-threads")
def test_engine_encode_threads(benchmark, tokenizer, corpus, warmups):
    threads = os.cpu_count() or 1
    once(benchmark, lambda: tokenizer.encode_batch(corpus, threads=threads),
         unseen(tokenizer, warmups["stdlib"], threads))


@pytest.mark.benchmark(group="encode-all-threads")
def test_tiktoken_encode_ordinary_batch(benchmark, tokenizer, corpus, warmups):
    enc = tiktoken_of(tokenizer)
    threads = os.cpu_count() or 1
    once(benchmark, lambda: enc.encode_ordinary_batch(corpus, num_threads=threads),
         lambda: enc.encode_ordinary_batch(warmups["stdlib"], num_threads=threads))


@pytest.mark.benchmark(group="train-4096")
def test_engine_train(benchmark, corpus):
    ByteBpeTrainer(vocab_size=300, tie_break="hf").train(corpus[:2])
    benchmark.pedantic(lambda: ByteBpeTrainer(vocab_size=4096, tie_break="hf").train(corpus), rounds=2)


@pytest.mark.benchmark(group="train-4096")
def test_hf_train(benchmark, corpus):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import pre_tokenizers, trainers

    def train():
        model = tokenizers.Tokenizer(tokenizers.models.BPE())
        model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        model.train_from_iterator(corpus, trainers.BpeTrainer(
            vocab_size=4096, special_tokens=["<bos>", "<eos>"], show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))

    benchmark.pedantic(train, rounds=2)


@pytest.mark.benchmark(group="long-piece")
@pytest.mark.parametrize("length", [100_000, 1_000_000])
def test_engine_long_run_of_one_letter(benchmark, tokenizer, length):
    text = "a" * length
    tokenizer.encode(text)
    benchmark(tokenizer.encode, text)
