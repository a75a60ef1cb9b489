"""The ``engine`` command: a click group. The one place where EngineError becomes a CLI message.

It registers every command module of ``engine.commands``; how a library message reads on the
command line (``cli_spelling``, ``one_line``) is ``engine.commands._messages``, which the commands
use too, so no command imports this module back."""

from __future__ import annotations

import sys
import traceback

import click

from engine import __version__
from engine.commands._messages import cli_spelling, describe_os_error, one_line  # noqa: F401  (re-exported)
from engine.errors import EngineError, is_interrupt


class EngineGroup(click.Group):
    """User errors (EngineError, and OSError such as a missing or unwritable path) become one line on
    stderr and exit 2; an interrupt (SIGINT) is one line and exit 130; any other exception is
    internal: exit 1, traceback with ``--debug``."""

    def invoke(self, ctx: click.Context):
        try:
            return self._invoke(ctx)
        finally:  # the status is decided; the console script then ignores SIGINT (engine.__main__)
            on_done = ctx.obj.get("on_done") if isinstance(ctx.obj, dict) else None
            if on_done is not None:
                on_done()

    def _invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except EngineError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                traceback.print_exc()
            click.echo(f"error: {one_line(cli_spelling(str(exc)))}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:  # SIGINT: a writer keeps its finished files for --resume and unlocks
            self._interrupted(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, BrokenPipeError):
            raise  # click exits quietly on a closed stdout pipe (`engine batches show ... | head`)
        except OSError as exc:  # the file system said no (permissions, disk full, a directory where a file goes)
            if ctx.obj and ctx.obj.get("debug"):
                traceback.print_exc()
            click.echo(f"error: {one_line(describe_os_error(exc))}", err=True)
            ctx.exit(2)
        except Exception as exc:  # internal error: say so, point at --debug
            if is_interrupt(exc):  # SIGINT during a kernel on the main thread (Numba's SystemError)
                self._interrupted(ctx)
            if ctx.obj and ctx.obj.get("debug"):
                traceback.print_exc()
            else:
                click.echo(
                    f"internal error: {type(exc).__name__}: {one_line(str(exc))} (run with --debug for the traceback)",
                    err=True,
                )
            ctx.exit(1)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Every argument must be text: bytes that are not UTF-8 (a shell's ``$'\\xff'``, which Python
        keeps as lone surrogates) are a usage error naming the argument, before anything runs."""
        for arg in args:
            if not isinstance(arg, str):  # main([...]) from Python may pass a Path; click converts it
                continue
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError as exc:
                try:
                    raw = arg.encode("utf-8", "surrogateescape")  # the bytes the shell gave
                except UnicodeEncodeError:
                    raw = arg.encode("utf-8", "backslashreplace")
                raise click.UsageError(f"argument {raw!r} is not valid UTF-8 (at character {exc.start}); engine "
                                       "takes its arguments, paths included, as UTF-8 text", ctx) from None
        return super().parse_args(ctx, args)

    @staticmethod
    def _interrupted(ctx: click.Context):
        if ctx.obj and ctx.obj.get("debug"):
            traceback.print_exc()
        hint = ": rerun with --resume to continue" if ctx.invoked_subcommand == "prepare" else ""
        click.echo(f"interrupted{hint}", err=True)
        ctx.exit(130)


@click.group(cls=EngineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="engine")
@click.option("--debug", is_flag=True, help="Print full tracebacks for errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """engine: turn raw text corpora into the exact tensors a language model trains on.

    \b
    Example:
      engine prepare                       # the bundled corpus in data/
      engine inspect out/store
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _register_commands() -> None:
    """Each command lives in engine/commands/<name>.py and exposes ``command`` (a click command)."""
    import importlib
    import pkgutil

    import engine.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"engine.commands.{info.name}")
        cmd = getattr(module, "command", None)
        if cmd is not None:
            main.add_command(cmd)


_register_commands()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(prog_name="engine"))
