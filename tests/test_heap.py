"""The BPE binary heap (engine/kernels/heap.py) against its plain twin."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.kernels.heap import heap_grow, heap_pop, heap_push, new_heap
from tests.naive_tokenizers import naive_heap_pops


def run_heap(operations):
    heap, size, popped = new_heap(1), 0, []
    for op in operations:
        if op[0] == "push":
            if size == heap.shape[0]:
                heap = heap_grow(heap)
            size = heap_push(heap, size, op[1], op[2], op[3])
        else:
            popped.append(tuple(int(v) for v in heap[0]))
            size = heap_pop(heap, size)
    return popped, size


def valid(operations):
    """Only pops of a non-empty heap."""
    out, size = [], 0
    for op in operations:
        if op[0] == "pop" and size == 0:
            continue
        size += 1 if op[0] == "push" else -1
        out.append(op)
    return out


key = st.integers(-3, 3) | st.integers(-(2**62), 2**62)
push = st.tuples(st.just("push"), key, key, st.integers(0, 2**40))


@settings(max_examples=200, deadline=None)
@given(st.lists(push | st.just(("pop",)), max_size=120))
def test_pops_in_key_order_like_the_twin(operations):
    operations = valid(operations)
    left = sum(1 if op[0] == "push" else -1 for op in operations)
    popped, size = run_heap(operations)
    assert size == left
    # Drained to the end, every pushed row comes out once. Keys come out in the twin's order; among
    # equal keys the payloads may come in another order (so only the drained multiset is compared).
    operations = operations + [("pop",)] * left
    popped, size = run_heap(operations)
    expected = naive_heap_pops(operations)
    assert size == 0
    assert [row[:2] for row in popped] == [row[:2] for row in expected]
    assert sorted(popped) == sorted(expected) == sorted(op[1:] for op in operations if op[0] == "push")


def test_grows_and_drains_in_order():
    rng = np.random.default_rng(7)
    keys = rng.integers(-1000, 1000, size=(5000, 2))
    operations = [("push", int(a), int(b), i) for i, (a, b) in enumerate(keys)] + [("pop",)] * 5000
    popped, size = run_heap(operations)
    assert size == 0
    assert [row[:2] for row in popped] == sorted((int(a), int(b)) for a, b in keys)
    assert sorted(row[2] for row in popped) == list(range(5000))


def test_edge_single_row_and_equal_keys():
    assert run_heap([("push", 5, 5, 9), ("pop",)]) == ([(5, 5, 9)], 0)
    popped, _ = run_heap([("push", 1, 1, p) for p in range(4)] + [("pop",)] * 4)
    assert sorted(row[2] for row in popped) == [0, 1, 2, 3] and {row[:2] for row in popped} == {(1, 1)}
