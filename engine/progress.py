"""Progress on stderr for steps that can take more than a second.

A ``Progress`` prints at most a few lines per second, with items/s and MB/s, and one closing
line; ``quiet=True`` (the CLI's ``--quiet``) silences it. On a terminal it redraws one line with
``\\r``; elsewhere (CI logs, pipes) it prints a line every ``interval`` seconds.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


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

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(failed=exc_type is not None)

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
        parts = [f"{self.label}: {self.items:,} {self.unit}"]
        if self.total:
            parts[0] += f"/{self.total:,} ({100.0 * self.items / self.total:.0f}%)"
        parts.append(f"{self.items / elapsed:,.0f} {self.unit}/s")
        if self.bytes:
            parts.append(f"{self.bytes / elapsed / 1e6:,.1f} MB/s")
        parts.append(f"{elapsed:.1f}s")
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
        if self.quiet:
            return
        now = time.perf_counter()
        if self._shown or now - self._start >= self.min_duration:
            line = self._line(now) + (" (failed)" if failed else " done")
            self._write(line, final=True)
