"""engine.parallel: the thread-count setting and the ordered pool."""

import pytest

from engine.errors import ConfigurationError
from engine.parallel import OrderedPool, resolve_threads


def test_threads_setting(monkeypatch):
    monkeypatch.delenv("ENGINE_THREADS", raising=False)
    assert resolve_threads(None) >= 1
    monkeypatch.setenv("ENGINE_THREADS", "3")
    assert resolve_threads(None) == 3
    assert resolve_threads(2) == 2
    monkeypatch.setenv("ENGINE_THREADS", "many")
    with pytest.raises(ConfigurationError, match="ENGINE_THREADS='many'"):
        resolve_threads(None)
    with pytest.raises(ConfigurationError, match="--threads is 0"):
        resolve_threads(0)


def test_ordered_pool_keeps_order_and_raises_in_turn():
    def work(x):
        if x == 7:
            raise ValueError("seven")
        return x * x

    assert list(OrderedPool(work, 3).map(iter(range(7)))) == [x * x for x in range(7)]
    seen = []
    with pytest.raises(ValueError, match="seven"):
        for y in OrderedPool(work, 3).map(iter(range(20))):
            seen.append(y)
    assert seen == [x * x for x in range(7)]
