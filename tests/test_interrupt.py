"""SIGINT at start-up or during a command: one line ``interrupted``, exit 130, no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent

# Sends SIGINT to itself when the CLI starts importing ``module``: the interrupt lands in start-up.
INTERRUPT_DURING_IMPORT = """
import builtins, os, runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # even when the parent ignores SIGINT (a background job)
real_import = builtins.__import__
def hook(name, *args, **kwargs):
    if name == sys.argv[1]:
        builtins.__import__ = real_import
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *args, **kwargs)
builtins.__import__ = hook
sys.argv = ["engine", *sys.argv[2:]]
runpy.run_module("engine", run_name="__main__", alter_sys=True)
"""


def default_sigint() -> None:
    """In the child before exec: SIGINT back to its default (a background job's shell ignores it), so
    Python installs its KeyboardInterrupt handler as it does in a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def environment():
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.mark.parametrize("module", ["engine.cli", "click", "pyarrow", "numba", "engine.store"])
def test_sigint_while_importing_is_one_line_and_exit_130(tmp_path, module):
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPT_DURING_IMPORT, module, "inspect", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=120, env=environment(), cwd=tmp_path)
    assert result.returncode == 130, result.stderr
    assert result.stderr == "interrupted\n"
    assert result.stdout == ""


# A command that ends normally, then SIGINT while the CLI tears down (click's close callbacks).
INTERRUPT_WHILE_EXITING = """
import os, signal, sys, time
import click
signal.signal(signal.SIGINT, signal.default_int_handler)
from engine.__main__ import run
from engine.cli import main

@main.command("finish-then-interrupt")
@click.pass_context
def finish(ctx):
    click.echo("done")
    def interrupt():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the signal is delivered here, if it is to be
    ctx.find_root().call_on_close(interrupt)

sys.argv = ["engine", "finish-then-interrupt"]
run()
"""


def test_sigint_after_the_command_ended_keeps_its_status(tmp_path):
    """Once the command has ended, an interrupt while exiting changes nothing: status 0, no
    'Aborted!', no death by the signal."""
    result = subprocess.run([sys.executable, "-c", INTERRUPT_WHILE_EXITING], capture_output=True, text=True,
                            timeout=120, env=environment(), cwd=tmp_path, preexec_fn=default_sigint)
    assert (result.returncode, result.stdout, result.stderr) == (0, "done\n", "")


def test_sigint_at_real_start_up_times(tmp_path):
    """A real signal at several moments of ``python -m engine prepare`` start-up."""
    (tmp_path / "c.txt").write_text("some text\n" * 50)
    for delay in (0.3, 0.8):
        process = subprocess.Popen(
            [sys.executable, "-m", "engine", "prepare", str(tmp_path / "c.txt"), "--out", str(tmp_path / "o"),
             "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(), cwd=tmp_path,
            preexec_fn=default_sigint)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
        if process.returncode == 0:  # finished before the signal: nothing to check at this delay
            continue
        assert process.returncode == 130, err
        # before the command ran (start-up) or inside prepare, which points at --resume
        assert err in ("interrupted\n", "interrupted: rerun with --resume to continue\n")
        assert "Traceback" not in out + err


def test_interrupt_inside_a_command_is_exit_130(monkeypatch, tmp_path):
    from engine.cli import main
    from engine.commands import inspect as inspect_command

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(inspect_command.TokenStore, "open", interrupted)
    result = CliRunner().invoke(main, ["inspect", str(tmp_path)])
    assert result.exit_code == 130
    assert result.output == "interrupted\n"


def test_sigint_during_a_kernel_on_the_main_thread_is_an_interrupt():
    """Numba raises SystemError (cause: the KeyboardInterrupt) when SIGINT arrives while a kernel runs
    on the main thread and returns objects; is_interrupt, and with it the CLI and the store writer,
    take it for the interrupt it is."""
    import os
    import threading

    import numpy as np
    from numba import njit

    from engine.errors import is_interrupt

    @njit(nogil=True)
    def spin(n):
        s = 0
        for i in range(n):
            s = (s * 31 + i) % 1000003
        return s, np.empty(4, np.int64)

    spin(10)
    # Python's own SIGINT handler, whatever this process inherited (a job started in the background
    # by a non-interactive shell starts with SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        spin(1_500_000_000)  # about a second: longer than the timer; the signal is seen when it returns
    except BaseException as exc:  # noqa: B036 (the interrupt is what is tested)
        caught = exc
    else:
        caught = None
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert caught is not None and is_interrupt(caught)
    assert not is_interrupt(SystemError("returned a result with an exception set"))
    assert not is_interrupt(ValueError())


def test_an_interrupt_during_a_kernel_is_exit_130_on_the_cli(monkeypatch, tmp_path):
    from engine.cli import main
    from engine.commands import inspect as inspect_command

    def interrupted(*args, **kwargs):
        raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set") from KeyboardInterrupt()

    monkeypatch.setattr(inspect_command.TokenStore, "open", interrupted)
    result = CliRunner().invoke(main, ["inspect", str(tmp_path)])
    assert result.exit_code == 130
    assert result.output == "interrupted\n"
