"""End to end, engine vs Hugging Face (tokenizers + datasets.map + group_texts), 2 cores each.

See peers_end_to_end.py for what each side runs. Both run once per round on the same corpus in the
same session; the table (per stage and total, with the ratio) is printed and kept in extra_info.

    pytest bench/bench_end_to_end.py --benchmark-only -s            # the whole stdlib corpus
    ENGINE_BENCH_QUICK=1 pytest bench/bench_end_to_end.py --benchmark-only -s
"""

from __future__ import annotations

import os

import pytest

from peers_end_to_end import compare, table


def test_end_to_end_engine_vs_huggingface(benchmark):
    pytest.importorskip("datasets", reason="the peer needs `pip install datasets tokenizers`")
    quick = bool(os.environ.get("ENGINE_BENCH_QUICK"))
    results = benchmark.pedantic(lambda: compare(quick), rounds=1, iterations=1)
    print("\n" + table(results))
    benchmark.extra_info.update(results)
    total = results["huggingface"]["total"] / results["engine"]["total"]
    benchmark.extra_info["ratio_total"] = total
