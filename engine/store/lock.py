"""``DIR.lock``: one writer per store at a time, across processes; a dead writer's lock is stale."""

from __future__ import annotations

import os
import time
from pathlib import Path

from engine.errors import StoreError
from engine.store_files import LOCK_SUFFIX

__all__ = ["WriterLock", "pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class WriterLock:
    """``DIR.lock`` holding the writer's pid, created atomically (hard link of a complete file)."""

    def __init__(self, store_path: Path, *, wait: bool, timeout: float, poll: float = 0.05):
        self.path = store_path.with_name(store_path.name + LOCK_SUFFIX)
        self.store_path, self.wait, self.timeout, self.poll = store_path, wait, timeout, poll

    def _holder(self) -> int | None:
        try:
            text = self.path.read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else -1

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout
        draft = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        draft.write_text(f"{os.getpid()}\n")
        try:
            while True:
                try:
                    os.link(draft, self.path)
                    self._clear_dead_drafts(draft)
                    return
                except FileExistsError:
                    pass
                holder = self._holder()
                if holder is None:
                    continue
                if holder <= 0 or not pid_alive(holder):
                    # Stale: its writer died. Re-read right before removing, so a fresh lock survives.
                    if self._holder() == holder:
                        self.path.unlink(missing_ok=True)
                    continue
                if not self.wait or time.monotonic() >= deadline:
                    waited = f" after waiting {self.timeout:g} s" if self.wait else ""
                    raise StoreError(
                        f"{self.path}: token store {self.store_path} is being written by process {holder} "
                        f"(lock file {self.path}){waited}; wait for it (wait=True) or, if that process "
                        "does not write this store, remove the lock file"
                    )
                time.sleep(self.poll)
        finally:
            draft.unlink(missing_ok=True)

    def _clear_dead_drafts(self, mine: Path) -> None:
        """Drafts ``.DIR.lock.<pid>`` that killed writers left behind (their pid is gone)."""
        for draft in self.path.parent.glob(f".{self.path.name}.*"):
            pid = draft.name.rsplit(".", 1)[-1]
            if draft != mine and pid.isdigit() and not pid_alive(int(pid)):
                draft.unlink(missing_ok=True)

    def release(self) -> None:
        if self._holder() == os.getpid():
            self.path.unlink(missing_ok=True)
