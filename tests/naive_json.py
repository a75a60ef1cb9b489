"""Plain twin of engine/kernels/json_numbers.py: the elements of a flat array of JSON numbers, by
``bytes.split`` and a regex per element."""

import re

from engine.kernels.json_numbers import CLOSED, INVALID, MAX_NUMBER_CHARS, OPEN

_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SPACE = b" \t\r"


def _element(part: bytes) -> bool:
    number = part.strip(_SPACE)
    return len(number) <= MAX_NUMBER_CHARS and _NUMBER.fullmatch(number) is not None


def naive_number_array(buf: bytes, start: int, end: int) -> tuple[int, int]:
    """``(status, at)`` as ``number_array`` gives it; for INVALID only the status is defined here (``at`` -1)."""
    data = bytes(buf[start:end])
    close = data.find(b"]")
    body = data if close < 0 else data[:close]
    parts = body.split(b",")
    complete, tail = (parts, None) if close >= 0 else (parts[:-1], parts[-1])
    if not all(_element(part) for part in complete):
        return INVALID, -1
    if tail is None:
        return CLOSED, start + close
    number = tail.strip(_SPACE)
    if tail.rstrip(_SPACE) != tail and number:  # a number that whitespace ended is whole
        ok = _element(number)
    else:  # the number so far is a prefix of one: it or it with one more digit is a number
        ok = not number or (len(number) <= MAX_NUMBER_CHARS and (_NUMBER.fullmatch(number) is not None
                                                                 or _NUMBER.fullmatch(number + b"1") is not None))
    return (OPEN, start + len(body) - len(tail)) if ok else (INVALID, -1)
