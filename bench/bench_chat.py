"""Chat data to packed rows with loss weights beside TRL's preparation (see peers_chat.py for the workload).

Run: ``pytest bench/bench_chat.py --benchmark-only`` (ENGINE_BENCH_QUICK=1: 2,400 conversations).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="needs the bench extra (trl)")
pytest.importorskip("datasets", reason="needs the bench extra (datasets)")

from peers_chat import _tokenizer_json, engine_side, trl_side, workload  # noqa: E402

QUICK = bool(os.environ.get("ENGINE_BENCH_QUICK"))


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    conversations, template = workload(QUICK)
    tokenizer_json = _tokenizer_json(Path(tmp_path_factory.mktemp("chat")))
    return conversations, template, tokenizer_json


@pytest.mark.benchmark(group="chat-to-packed-rows")
def test_chat_engine(benchmark, case):
    conversations, template, tokenizer_json = case
    run = engine_side(tokenizer_json, template)
    benchmark(run, conversations)


@pytest.mark.benchmark(group="chat-to-packed-rows")
def test_chat_trl(benchmark, case):
    conversations, template, tokenizer_json = case
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    run = trl_side(tokenizer_json, template)
    benchmark(run, conversations)
