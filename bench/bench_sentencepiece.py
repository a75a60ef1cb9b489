"""pytest-benchmark: a SentencePiece BPE model encoded by engine beside the ``sentencepiece`` library.

Run: ``pytest bench/bench_sentencepiece.py --benchmark-only``. The model and the protocol are those
of peers_sentencepiece.py (8,000 pieces, nmt_nfkc, byte fallback, trained on Tiny Shakespeare;
3 MB of the standard library, each round on text the encoder has not met: caches emptied and a
warm-up on Tiny Shakespeare first, untimed). ``python bench/peers_sentencepiece.py`` prints the rows.
"""

import pytest

from peers_byte_bpe import stdlib_texts, unseen
from peers_sentencepiece import trained_model
from engine.tokenizers.loading import load_tokenizer

ROUNDS = 5


@pytest.fixture(scope="module")
def corpus():
    return stdlib_texts(3_000_000)


@pytest.fixture(scope="module")
def model_path():
    pytest.importorskip("sentencepiece", reason="needs the test extra (pip install -e '.[test]')")
    return trained_model()


@pytest.fixture(scope="module")
def processor(model_path):
    import sentencepiece

    return sentencepiece.SentencePieceProcessor(model_file=str(model_path))


@pytest.fixture(scope="module")
def tokenizer(model_path, corpus, processor):
    tok = load_tokenizer(model_path)
    assert [a.tolist() for a in tok.encode_batch(corpus[:50])] == [processor.encode(t) for t in corpus[:50]]
    return tok


@pytest.mark.benchmark(group="spm-encode-stdlib-3mb")
def test_engine_encode(benchmark, tokenizer, corpus, shakespeare_text):
    warm = unseen(tokenizer, [shakespeare_text])
    benchmark.pedantic(lambda: tokenizer.encode_batch(corpus), setup=lambda: warm() and None, rounds=ROUNDS,
                       iterations=1)


@pytest.mark.benchmark(group="spm-encode-stdlib-3mb")
def test_sentencepiece_encode(benchmark, processor, corpus):
    benchmark.pedantic(lambda: [processor.encode(t) for t in corpus], rounds=2, iterations=1)
