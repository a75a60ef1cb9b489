"""``DIR.lock``: one writer per store at a time, across processes; a dead writer's lock is stale.

The lock's own format is one line, ``<pid>`` (and a newline), made as a draft ``.DIR.lock.<pid>`` holding the same
line and hard-linked into place. A ``DIR.lock`` of any other content is not engine's: it is refused
by name, never removed; drafts of dead pids are removed only when they hold their own pid.
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

from engine.errors import StoreError
from engine.store_files import LOCK_SUFFIX, lock_pid

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
        """The pid in the lock file (its whole content is ``<pid>\\n``), None when there is none; a
        StoreError when the file is not an engine lock (a user's ``store.lock``), which is never removed."""
        try:
            text = self.path.read_text(encoding="ascii", errors="replace")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot read the lock file ({exc.strerror})") from None
        pid = lock_pid(text)
        if pid is None:
            raise StoreError(f"{self.path}: exists and is not an engine lock (expected one line holding a process "
                             f"id, found {text[:40]!r}); it is not ours to remove: move it away")
        return pid

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout
        draft = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            draft.write_text(f"{os.getpid()}\n")
        except OSError as exc:  # a full disk: nothing of ours is left behind, and the message names the file
            draft.unlink(missing_ok=True)
            raise StoreError(f"{draft}: cannot write the lock file ({exc.strerror})") from None
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
                if not pid_alive(holder):
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
        for draft in self.path.parent.glob(glob.escape(f".{self.path.name}.") + "*"):
            pid = draft.name[len(self.path.name) + 2:]
            if draft == mine or lock_pid(pid + "\n") is None or pid_alive(int(pid)):
                continue
            try:  # a draft holds its own pid: anything else of that name is not ours
                ours = draft.is_file() and not draft.is_symlink() and draft.read_text(encoding="ascii") == f"{pid}\n"
            except (OSError, UnicodeDecodeError):
                ours = False
            if ours:
                draft.unlink(missing_ok=True)

    def release(self) -> None:
        if self._holder() == os.getpid():
            self.path.unlink(missing_ok=True)
