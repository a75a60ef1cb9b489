"""Progress lines: rates, the closing line, and the first-run compile notice."""

import io
import time

from numba.core import event as numba_event

from engine.progress import Progress


def test_rates_and_closing_line():
    stream = io.StringIO()
    with Progress("step", total=4, unit="docs", stream=stream, interval=0.0, min_duration=0.0) as bar:
        bar.update(items=2)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("step: 2 docs/4 (50%), ")
    assert lines[-1].startswith("step: 2 docs/4 (50%), ") and lines[-1].endswith(" done")


def test_compiling_is_announced_once_and_left_out_of_rates():
    stream = io.StringIO()
    with Progress("training", unit="merges", stream=stream, interval=0.0, min_duration=0.0) as bar:
        for _ in range(2):
            with numba_event.trigger_event("numba:compile", data={}):
                with numba_event.trigger_event("numba:compile", data={}):  # nested compiles count once
                    time.sleep(0.3)
        bar.update(items=1000)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "training: compiling kernels (first run only)"
    assert sum("compiling kernels (first run only)" in line for line in lines) == 1
    rate = float(lines[1].split(", ")[1].split()[0].replace(",", ""))
    assert rate > 1000 / 0.3  # 0.6 s of compiling left out: the rate counts only the working time
    assert lines[-1].endswith(" (0.6s compiling kernels) done")


def test_quiet_says_nothing_about_compiling():
    stream = io.StringIO()
    with Progress("step", quiet=True, stream=stream, min_duration=0.0):
        with numba_event.trigger_event("numba:compile", data={}):
            pass
    assert stream.getvalue() == ""
