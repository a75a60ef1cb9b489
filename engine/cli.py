"""The ``engine`` command: a click group. The one place where EngineError becomes a CLI message."""

from __future__ import annotations

import re
import sys
import traceback

import click

from engine import __version__
from engine.errors import EngineError, is_interrupt


# Library messages name keyword arguments (``on_invalid_utf8='replace'``); the CLI says the flag instead.
_KEYWORD_HINT = re.compile(r"\b(on_invalid_utf8|skip_bad_lines)=(?:'(\w+)'(?: or '(\w+)')?|True)")
# ``row_length=0`` / ``context=-1`` in a checked option's message: the flag and the value.
_NUMBER_OPTION = re.compile(r"\b(context|context_length|row_length|batch_size|stride)=(-?\d+)\b")


_FLAG_OF = {"context_length": "context"}  # a keyword whose flag is spelled otherwise


def cli_spelling(message: str) -> str:
    """Python spellings in a message -> the CLI's: ``on_invalid_utf8='replace' or 'skip'`` ->
    ``--on-invalid-utf8 replace or skip``, ``row_length=0`` -> ``--row-length 0``."""

    def flag(match: re.Match) -> str:
        name = "--" + match.group(1).replace("_", "-")
        values = [v for v in match.group(2, 3) if v]
        return f"{name} {' or '.join(values)}" if values else name

    message = _KEYWORD_HINT.sub(flag, message)
    message = _NUMBER_OPTION.sub(lambda m: f"--{_FLAG_OF.get(m.group(1), m.group(1)).replace('_', '-')} {m.group(2)}",
                                 message)
    return message.replace("text_column and id_column are both", "--text-column and --id-column are both")


def _describe_os_error(exc: OSError) -> str:
    """``path: reason`` for a file the user named that cannot be read or written."""
    where = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    return f"{where}: {reason}" if where else reason


def one_line(text: str) -> str:
    """``text`` with every non-printable character (newline, tab, ESC, ...) escaped as ``repr`` does,
    so an error message quoting a file name or an id from a file is always one line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class EngineGroup(click.Group):
    """User errors (EngineError, and OSError such as a missing or unwritable path) become one line on
    stderr and exit 2; an interrupt (SIGINT) is one line and exit 130; any other exception is
    internal: exit 1, traceback with ``--debug``."""

    def invoke(self, ctx: click.Context):
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
            click.echo(f"error: {one_line(_describe_os_error(exc))}", err=True)
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
