"""A test hook: ``ENGINE_TEST_STOP_AT=STAGE:N`` SIGKILLs this process the N-th time it reaches ``STAGE``.

Only tests set the variable (tests/test_kill.py kills ``engine prepare`` at each stage of a run, so
every kill lands at the same point on every machine). Unset, ``stop_point`` returns at once. The
stages: ``read`` (pass 1, after each batch read), ``fitted`` (tokenizer fitted), ``chunk`` (pass 2,
after each chunk written), ``file`` (a store file finished), ``manifest`` (store manifest written,
not yet renamed into place), ``swap`` (the old store renamed away, the new one not yet in place),
``outputs`` (the new store in place, before each rename of ``tokenizer.json`` and ``report.json``),
``stored`` (everything in place); for ``pack --out``: ``pack-swap`` (the earlier output renamed away, the
new one not yet in place); for ``batches --out``: ``epoch-index`` (the new index written, not
yet renamed) and ``epoch-manifest`` (the new index in place, the manifest not yet replaced).
"""

from __future__ import annotations

import os
import signal

STOP_AT_VARIABLE = "ENGINE_TEST_STOP_AT"
_reached: dict[str, int] = {}


def stop_point(stage: str) -> None:
    """SIGKILL this process if ``ENGINE_TEST_STOP_AT`` names ``stage`` and this is its N-th pass (N=1 if omitted)."""
    wanted = os.environ.get(STOP_AT_VARIABLE)
    if not wanted:
        return
    name, _, count = wanted.partition(":")
    if name != stage:
        return
    _reached[stage] = _reached.get(stage, 0) + 1
    if _reached[stage] == int(count or 1):
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
