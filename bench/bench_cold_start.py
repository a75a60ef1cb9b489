"""First runs on an empty Numba cache vs warm runs (see peers_cold_start.py for the cases).

Run: ``pytest bench/bench_cold_start.py --benchmark-only -s`` (ENGINE_BENCH_QUICK=1: one round),
or ``python bench/bench_cold_start.py [--quick]`` for the rows alone. The rows are information
(``peers_cold_start.INFO`` says why their cold <= 4x warm target was retired).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers_cold_start import CASES, cold_and_warm  # noqa: E402


@pytest.mark.parametrize("label, case", CASES, ids=["prepare", "byte_train", "pack_documents"])
def test_cold_start(benchmark, label, case):
    rounds = 1 if os.environ.get("ENGINE_BENCH_QUICK") else 3
    times = benchmark.pedantic(lambda: cold_and_warm(case, rounds), rounds=1, iterations=1)
    ratio = times["cold_s"] / times["warm_s"]
    benchmark.extra_info.update({"case": label, **times, "ratio": ratio})
    print(f"\n{label}: cold {times['cold_s']:.2f} s, warm {times['warm_s']:.2f} s, {ratio:.1f}x "
          f"(CPU {times['cold_cpu_s']:.2f} s / {times['warm_cpu_s']:.2f} s)")


if __name__ == "__main__":
    from peers_cold_start import rows

    for r in rows("--quick" in sys.argv[1:]):
        print(f"{r['benchmark']}: cold {r['engine_s']:.2f} s, warm {r['peer_s']:.2f} s, {r['ratio']:.1f}x "
              f"(target {r['target']}; CPU {r['cold_cpu_s']:.2f} s / {r['warm_cpu_s']:.2f} s)")
