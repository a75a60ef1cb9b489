"""Arrays of JSON numbers in a long JSONL line (``engine.corpus.long_lines``): one pass over the bytes.

``number_array(buf, start, end)`` reads ``buf[start:end]``, the bytes after an array's ``[``, as the
elements ``ws number ws (, ws number ws)*`` of a flat array of numbers: JSON's number grammar
(``-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?``), each number at most ``MAX_NUMBER_CHARS``
characters (a longer one is a violation, so Python's ``int`` limits never decide), whitespace
space, tab or carriage return (a JSONL line holds no newline). It returns ``(status, at)``:

- ``CLOSED``: one or more elements, then ``]`` at ``at``;
- ``OPEN``: ``buf[start:end]`` ends without a violation (the array goes on past ``end``); ``at`` is
  just after its last comma (``start`` when it has none);
- ``INVALID``: ``at`` is the first byte that no such array continues with (``[]`` is one too).
"""

from __future__ import annotations

from engine.kernels import kernel

__all__ = ["number_array", "CLOSED", "OPEN", "INVALID", "MAX_NUMBER_CHARS"]

CLOSED, OPEN, INVALID = 1, 0, -1
MAX_NUMBER_CHARS = 40

# States: before a number (after "[" or ","), after "-", after a leading 0, in integer digits,
# after ".", in fraction digits, after "e", after the exponent's sign, in exponent digits, after a
# number's trailing whitespace.
_BEFORE, _MINUS, _ZERO, _INT, _DOT, _FRACTION, _E, _E_SIGN, _EXPONENT, _AFTER = range(10)


@kernel(inline="always")
def _is_space(c):
    return c == 0x20 or c == 0x09 or c == 0x0D


@kernel(inline="always")
def _is_digit(c):
    return 0x30 <= c <= 0x39


@kernel
def number_array(buf, start, end):
    """``(status, at)`` of the array elements in ``buf[start:end]`` (see the module docstring)."""
    state = _BEFORE
    length = 0  # characters of the number being read
    last_comma_end = start
    for i in range(start, end):
        c = buf[i]
        ends_number = state == _ZERO or state == _INT or state == _FRACTION or state == _EXPONENT
        if ends_number or state == _AFTER:
            if c == 0x2C:  # ","
                state, length, last_comma_end = _BEFORE, 0, i + 1
                continue
            if c == 0x5D:  # "]"
                return CLOSED, i
            if _is_space(c):
                state = _AFTER
                continue
            if state == _AFTER:
                return INVALID, i
        if state == _BEFORE:
            if _is_space(c):
                continue
            if c == 0x2D:
                state = _MINUS
            elif c == 0x30:
                state = _ZERO
            elif _is_digit(c):
                state = _INT
            else:
                return INVALID, i
        elif state == _MINUS:
            if c == 0x30:
                state = _ZERO
            elif _is_digit(c):
                state = _INT
            else:
                return INVALID, i
        elif state == _ZERO or state == _INT:
            if _is_digit(c) and state == _INT:
                pass
            elif c == 0x2E:  # "."
                state = _DOT
            elif c == 0x65 or c == 0x45:  # "e", "E"
                state = _E
            else:
                return INVALID, i
        elif state == _DOT:
            if _is_digit(c):
                state = _FRACTION
            else:
                return INVALID, i
        elif state == _FRACTION:
            if c == 0x65 or c == 0x45:
                state = _E
            elif not _is_digit(c):
                return INVALID, i
        elif state == _E:
            if c == 0x2B or c == 0x2D:  # "+", "-"
                state = _E_SIGN
            elif _is_digit(c):
                state = _EXPONENT
            else:
                return INVALID, i
        elif state == _E_SIGN:
            if _is_digit(c):
                state = _EXPONENT
            else:
                return INVALID, i
        elif state == _EXPONENT:
            if not _is_digit(c):
                return INVALID, i
        length += 1
        if length > MAX_NUMBER_CHARS:
            return INVALID, i
    return OPEN, last_comma_end

