"""``python -m engine`` and the ``engine`` console script.

``run`` imports the CLI (Numba, pyarrow, every command) inside its own guard, so an interrupt
(SIGINT, Ctrl-C) at any moment of start-up ends with one line and exit status 130, as one during a
command does (``engine.cli.EngineGroup``), never with a traceback.
"""

from __future__ import annotations

import sys

INTERRUPTED_EXIT = 130  # 128 + SIGINT, the shell's convention


def interrupted() -> None:
    """One line on stderr, exit 130."""
    try:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
    finally:
        sys.exit(INTERRUPTED_EXIT)


def run() -> None:
    try:
        from engine.cli import main
    except KeyboardInterrupt:
        interrupted()
    main(prog_name="engine")


if __name__ == "__main__":
    run()
