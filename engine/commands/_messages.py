"""How library messages read on the command line: the flags' spellings, one line per message.

``engine.cli`` (where every EngineError becomes a message) and the commands that print what a
library call reported both use these, so the commands never import ``engine.cli``.
"""

from __future__ import annotations

import re

__all__ = ["cli_spelling", "describe_os_error", "one_line"]

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


def describe_os_error(exc: OSError) -> str:
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
