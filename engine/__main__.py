"""``python -m engine`` and the ``engine`` console script.

``run`` imports the CLI (Numba, pyarrow, every command) inside its own guard, so an interrupt
(SIGINT, Ctrl-C) at any moment of start-up ends with one line and exit status 130, as one during a
command does (``engine.cli.EngineGroup``), never with a traceback. Once the command has ended (its
output written, its status decided), SIGINT is ignored: an interrupt while the process exits (click's
teardown, thread and library shutdown) would otherwise end it by the signal, or as click's
"Aborted!", instead of with the status the command already chose.
"""

from __future__ import annotations

import os
import signal
import sys

INTERRUPTED_EXIT = 130  # 128 + SIGINT, the shell's convention


def interrupted() -> None:
    """One line on stderr, exit 130 at once: a start-up cut short has nothing to clean up, and a
    half-imported library's exit handlers must not turn the status into a death by SIGINT."""
    try:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
    finally:
        os._exit(INTERRUPTED_EXIT)


def ignore_interrupts() -> None:
    """SIGINT does nothing from now on (the command has ended; only exiting is left)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run() -> None:
    try:
        from engine.cli import main
    except KeyboardInterrupt:
        interrupted()
    main(prog_name="engine", obj={"on_done": ignore_interrupts})


if __name__ == "__main__":
    run()
