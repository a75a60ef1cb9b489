"""Progress on stderr for steps that can take more than a second.

A ``Progress`` prints at most a few lines per second, with items/s and MB/s, and one closing
line; ``quiet=True`` (the CLI's ``--quiet``) silences it. On a terminal it redraws one line with
``\\r``; elsewhere (CI logs, pipes) it prints a line every ``interval`` seconds.

The first run on a machine compiles Numba kernels (later runs load them from the cache). While a
step compiles, its line says "compiling kernels (first run only)" once, and the time spent compiling
is left out of its rates, so they never read as a slow "6 merges/s"; its elapsed time says how much
of it was compiling.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from engine import numba_internals as internals


class _CompileWatch(internals.CompileListener):
    """Seconds spent compiling Numba kernels in this process (top-level compiles only; a compile
    triggers nested ones), and the open progress steps to tell when one starts."""

    def __init__(self) -> None:
        self.depth = 0
        self.started = 0.0
        self.seconds = 0.0
        self.steps: list[Progress] = []

    def on_start(self, event) -> None:
        self.depth += 1
        if self.depth == 1:
            self.started = time.perf_counter()
            for step in self.steps:
                step.compiling()

    def on_end(self, event) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.seconds += time.perf_counter() - self.started

    def total(self) -> float:
        """Compile seconds so far, counting a compile still running."""
        return self.seconds + (time.perf_counter() - self.started if self.depth else 0.0)


_watch = _CompileWatch()
internals.register_listener(internals.COMPILE_EVENT, _watch)


class Progress:
    """Count items and bytes of one step; report rate and, when ``total`` is known, percent."""

    def __init__(
        self,
        label: str,
        *,
        total: int | None = None,
        unit: str = "docs",
        quiet: bool = False,
        stream: TextIO | None = None,
        interval: float = 0.5,
        min_duration: float = 1.0,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.min_duration = min_duration
        self.items = 0
        self.bytes = 0
        self._start = time.perf_counter()
        self._last = self._start
        self._shown = False
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._compile_start = _watch.total()
        self._told_compiling = False
        _watch.steps.append(self)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(failed=exc_type is not None)

    def compiling(self) -> None:
        """A kernel starts compiling while this step runs: say so once."""
        if self.quiet or self._told_compiling:
            return
        self._told_compiling = True
        self._write(f"{self.label}: compiling kernels (first run only)", final=True)

    def update(self, items: int = 0, nbytes: int = 0) -> None:
        self.items += items
        self.bytes += nbytes
        if self.quiet:
            return
        now = time.perf_counter()
        if now - self._start < self.min_duration or now - self._last < self.interval:
            return
        self._last = now
        self._write(self._line(now), final=False)

    def _line(self, now: float) -> str:
        elapsed = max(now - self._start, 1e-9)
        compiled = _watch.total() - self._compile_start
        working = max(elapsed - compiled, 1e-9)  # rates leave compiling out
        parts = [f"{self.label}: {self.items:,} {self.unit}"]
        if self.total:
            parts[0] += f"/{self.total:,} ({100.0 * self.items / self.total:.0f}%)"
        parts.append(f"{self.items / working:,.0f} {self.unit}/s")
        if self.bytes:
            parts.append(f"{self.bytes / working / 1e6:,.1f} MB/s")
        parts.append(f"{elapsed:.1f}s" + (f" ({compiled:.1f}s compiling kernels)" if compiled >= 0.05 else ""))
        return ", ".join(parts)

    def _write(self, line: str, *, final: bool) -> None:
        self._shown = True
        if self._tty:
            end = "\n" if final else ""
            self.stream.write("\r\x1b[K" + line + end)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self, *, failed: bool = False) -> None:
        """Print the closing line if anything was shown (or the step was long enough to matter)."""
        if self in _watch.steps:
            _watch.steps.remove(self)
        if self.quiet:
            return
        now = time.perf_counter()
        if self._shown or now - self._start >= self.min_duration:
            line = self._line(now) + (" (failed)" if failed else " done")
            self._write(line, final=True)
