"""Classic BPE vs its peers under pytest-benchmark (see peers_tokenizers.py for what is compared).

Run: pytest bench/bench_tokenizers.py --benchmark-only
Each pair of benchmarks shares a group, so the table shows engine and peer side by side.
"""

from __future__ import annotations

import pytest

from engine.tokenizers import BpeTrainer
from plain_python import encode_bpe, train_bpe
from peers_tokenizers import hf_trainer_run, tiktoken_encoding


@pytest.fixture(scope="module")
def split_text(shakespeare_text):
    return shakespeare_text, shakespeare_text[: int(len(shakespeare_text) * 0.9)]


@pytest.fixture(scope="module")
def bpe_200(split_text):
    return BpeTrainer(200).train(split_text[1])


@pytest.mark.benchmark(group="bpe-train-200")
def test_engine_train_200(benchmark, split_text):
    BpeTrainer(5).train("warm up the kernels")
    tok = benchmark(lambda: BpeTrainer(200).train(split_text[1]))
    assert len(tok.merges) == 200


@pytest.mark.benchmark(group="bpe-train-200")
def test_naive_train_20_merges_scale_x10(benchmark, split_text):
    merges = benchmark.pedantic(lambda: train_bpe(split_text[1], 20), rounds=1, iterations=1)
    assert merges == BpeTrainer(20).train(split_text[1]).merges


@pytest.mark.benchmark(group="bpe-train-200")
def test_hf_train_200(benchmark, split_text):
    pytest.importorskip("tokenizers")
    benchmark.pedantic(lambda: hf_trainer_run(split_text[1], 200), rounds=3, iterations=1)


@pytest.mark.benchmark(group="bpe-train-5000")
def test_engine_train_5000(benchmark, split_text):
    BpeTrainer(5).train("warm up the kernels")
    tok = benchmark.pedantic(lambda: BpeTrainer(5000).train(split_text[1]), rounds=3, iterations=1)
    assert len(tok.merges) == 5000


@pytest.mark.benchmark(group="bpe-train-5000")
def test_hf_train_5000(benchmark, split_text):
    pytest.importorskip("tokenizers")
    benchmark.pedantic(lambda: hf_trainer_run(split_text[1], 5000), rounds=1, iterations=1)


@pytest.mark.benchmark(group="bpe-encode")
def test_engine_encode(benchmark, split_text, bpe_200):
    bpe_200.encode("warm up")
    ids = benchmark(lambda: bpe_200.encode(split_text[0]))
    assert ids.shape[0] > 0


@pytest.mark.benchmark(group="bpe-encode")
def test_naive_encode(benchmark, split_text, bpe_200):
    pieces = benchmark.pedantic(lambda: encode_bpe(split_text[0], bpe_200.merges), rounds=1, iterations=1)
    assert pieces == bpe_200.tokenize(split_text[0])


@pytest.mark.benchmark(group="bpe-encode")
def test_tiktoken_encode(benchmark, split_text, bpe_200):
    pytest.importorskip("tiktoken")
    encoding = tiktoken_encoding(bpe_200)
    ids = benchmark(lambda: encoding.encode_ordinary(split_text[0]))
    assert [i + 2 for i in ids] == bpe_200.encode(split_text[0]).tolist()
