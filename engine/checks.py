"""Argument checks at public boundaries: one check per kind of argument, so every site says the same
thing and raises the same error class.

- ``as_int``: any integer type (never a bool) as a Python int;
- ``check_count``: an integer ``>= low`` named as the keyword it came from (``row_length=0: expected
  an integer >= 1``), ConfigurationError unless another class is asked for;
- ``positive_int``: an integer in ``1..limit`` (window sizes, strides, sample counts);
- ``byte_count``: a size in bytes, ``1..limit``: an int, or a string of digits with an optional unit
  (``kB``/``MB``/``GB``/``TB``: powers of 1000; ``KiB``/``MiB``/``GiB``/``TiB``: powers of 1024), such as
  ``--fit-sample 64MB`` (at most ``MAX_FIT_SAMPLE_BYTES``);
- ``check_seed``: a SplitMix64 seed, ``0..2^64-1``;
- ``check_batch_size``: rows per mini-batch (BatchError, the same in every epoch and mixture);
- ``check_rank``: a rank and world size of a data-parallel split of a batch;
- ``rank_rows``: rank ``r``'s rows of a batch, the one rule of every batch source (windows, packed
  epochs, mixtures);
- ``check_partition``: a ``Partition`` or its name (the error class of the caller's area);
- ``check_fraction``: a share in ``(0, 1]`` such as ``train_fraction``;
- ``parse_json``: the one parser of every JSON file engine reads (manifests, tokenizer files, epoch
  and batch files, resume records): at most ``JSON_MAX_DEPTH`` levels of nesting, integers of at most
  ``JSON_MAX_DIGITS`` digits, no NaN or Infinity; anything else is a ``JSONLimitError`` (a
  ``ValueError``) whose message says which limit and where, never a RecursionError;
- ``read_json``: a small JSON file (a manifest, a tokenizer file) with one message per way it is bad.
"""

from __future__ import annotations

import json
import operator
import os
import stat
from pathlib import Path

from engine.errors import BatchError, ConfigurationError
from engine.partition import Partition

INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1
# The largest --fit-sample: 2^48 bytes (256 TiB), far above any corpus one machine fits on, and checked
# before anything is read.
MAX_FIT_SAMPLE_BYTES = 1 << 48
BYTE_UNITS = {"": 1, "B": 1, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
              "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def as_int(value, name: str, *, expected: str = "an integer") -> int:
    """``value`` as a Python int (any integer type, never a bool), else ConfigurationError
    ``"<name> must be <expected>, got ..."``. Range checks stay with the caller."""
    if isinstance(value, bool):
        raise ConfigurationError(f"{name} must be {expected}, got the boolean {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ConfigurationError(f"{name} must be {expected}, got {type(value).__name__} {value!r}") from None


def _is_int(value) -> bool:
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def check_count(value, name: str, *, low: int = 0, error: type[Exception] = ConfigurationError) -> int:
    """``value`` as an int ``>= low`` (never a bool, a float or a string), else ``error``
    ``"<name>=<value!r>: expected an integer >= <low>"``."""
    if not _is_int(value) or operator.index(value) < low:
        raise error(f"{name}={value!r}: expected an integer >= {low}")
    return operator.index(value)


def positive_int(value, name: str, *, limit: int = INT64_MAX, why: str = "") -> int:
    """``value`` as an int in ``1..limit``, else ConfigurationError naming ``name``."""
    number = as_int(value, name)
    if number < 1:
        raise ConfigurationError(f"{name} must be positive (>= 1), got {number}")
    if number > limit:
        raise ConfigurationError(f"{name} is {number}, larger than the largest allowed value {limit}{why}")
    return number


def byte_count(value, name: str, *, limit: int) -> int:
    """A size in bytes in ``1..limit``: an int (never a bool), or a string of digits with an optional unit
    of ``BYTE_UNITS`` (``"64MB"``, ``"1GiB"``, ``"1_000_000"``), else ConfigurationError naming ``name``."""
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        digits = len(text) - len(text.lstrip("+-0123456789"))
        number, unit = text[:digits], text[digits:].strip()
        try:
            count = int(number) * BYTE_UNITS[unit]
        except (ValueError, KeyError):
            raise ConfigurationError(f"{name} must be a whole number of bytes (e.g. 1000000, 64MB or 1GiB; units: "
                                     f"{', '.join(u for u in BYTE_UNITS if u)}), got {value!r}") from None
    else:
        count = as_int(value, name, expected="a whole number of bytes")
    if not 1 <= count <= limit:
        raise ConfigurationError(f"{name} must be 1..{limit:,} bytes, got {count:,}")
    return count


def check_seed(seed) -> int:
    """A SplitMix64 seed: an integer in 0..2^64-1, else ConfigurationError."""
    number = as_int(seed, "seed", expected="an integer in 0..2^64-1")
    if not 0 <= number <= UINT64_MAX:
        raise ConfigurationError(f"seed must be an integer in 0..2^64-1, got {number}")
    return number


def check_batch_size(size) -> int:
    """Rows per mini-batch: an integer >= 1, else BatchError."""
    if not _is_int(size) or operator.index(size) < 1:
        raise BatchError(f"batch size must be a positive integer, got {size!r}")
    return operator.index(size)


def check_rank(rank, world_size) -> tuple[int, int]:
    """``(rank, world_size)`` as ints with ``world_size >= 1`` and ``0 <= rank < world_size``, else
    ConfigurationError."""
    for name, value in (("rank", rank), ("world_size", world_size)):
        if not _is_int(value):
            raise ConfigurationError(f"{name} must be an integer, got {value!r}")
    rank, world_size = operator.index(rank), operator.index(world_size)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ConfigurationError(f"need world_size >= 1 and 0 <= rank < world_size, got rank={rank}, "
                                 f"world_size={world_size}")
    return rank, world_size


def rank_rows(lo: int, hi: int, rank, world_size, *, batch: int) -> tuple[int, int]:
    """Rank ``rank``'s share of batch ``batch``, whose rows are ``[lo, hi)``: the contiguous rows
    ``[lo + r*width//w, lo + (r+1)*width//w)`` with ``width = hi - lo``. The shares of ranks
    ``0..w-1`` are disjoint, cover the batch in order and differ in size by at most one row.

    ``rank`` and ``world_size`` both None: the whole batch; only one of them: ConfigurationError; a
    bad pair: ``check_rank``'s ConfigurationError; ``world_size`` above the batch's width: BatchError
    (every rank needs at least one row, so no rank trains on an empty batch while others wait).
    """
    if rank is None and world_size is None:
        return lo, hi
    if rank is None or world_size is None:
        raise ConfigurationError("pass both rank and world_size, or neither")
    rank, world_size = check_rank(rank, world_size)
    width = hi - lo
    if world_size > width:
        raise BatchError(f"batch {batch} has {width} rows, fewer than world_size={world_size}: every rank needs "
                         "at least one row (expected a smaller world size or a larger batch)")
    return lo + rank * width // world_size, lo + (rank + 1) * width // world_size


def check_fraction(value, name: str) -> float:
    """``value`` as a float in ``(0, 1]`` (an int or float, never a bool), else ConfigurationError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigurationError(f"{name} is {value!r}, expected a number with 0 < {name} <= 1")
    return float(value)


def check_partition(value, error: type[Exception] = ConfigurationError):
    """``Partition`` from a Partition or its string value, else ``error``
    ``"unknown partition <value!r> (expected train, validation or test)"``."""
    try:
        return Partition(value)
    except ValueError:
        raise error(f"unknown partition {value!r} (expected train, validation or test)") from None


JSON_MAX_DEPTH = 64
JSON_MAX_DIGITS = 40


class JSONLimitError(ValueError):
    """JSON that parses but passes one of ``parse_json``'s limits."""


def _json_int(text: str) -> int:
    digits = len(text) - (text[0] == "-")
    if digits > JSON_MAX_DIGITS:
        raise JSONLimitError(f"an integer of {digits} digits (at most {JSON_MAX_DIGITS})")
    return int(text)


def _json_float(text: str) -> float:
    if len(text) > 4 * JSON_MAX_DIGITS:
        raise JSONLimitError(f"a number written with {len(text)} characters (at most {4 * JSON_MAX_DIGITS})")
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise JSONLimitError(f"the number {text[:20]} (too large for a float)")
    return value


def _json_constant(text: str):
    raise JSONLimitError(f"{text} (JSON has no such number)")


def parse_json(text: str | bytes, **options) -> object:
    """``json.loads(text)`` within the limits above (``options`` go to ``json.loads``, e.g.
    ``object_pairs_hook``, ``strict``). Raises ``json.JSONDecodeError`` for malformed JSON and
    ``JSONLimitError`` (both ValueErrors) for JSON past a limit. Nesting is checked after the C
    parser (which itself fails with RecursionError near 1,000 levels) without recursion."""
    try:
        value = json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant,
                           **options)
    except RecursionError:
        raise JSONLimitError(f"nested more than {JSON_MAX_DEPTH} levels deep") from None
    level = [value] if isinstance(value, (dict, list)) else []  # the containers one level deep, then the next
    depth = 0
    while level:
        depth += 1
        if depth > JSON_MAX_DEPTH:
            raise JSONLimitError(f"nested more than {JSON_MAX_DEPTH} levels deep")
        deeper = []
        for node in level:
            deeper += [child for child in (node.values() if isinstance(node, dict) else node)
                       if isinstance(child, (dict, list))]
        level = deeper
    return value


def read_json(path: Path, error: type[Exception], *, missing: str, what: str = "") -> object:
    """The parsed JSON in ``path``; ``error`` says ``"<path>: <missing>"`` when the file does not
    exist, ``"<path>: cannot read <what>..."`` when it cannot be read, and ``"<path>: <what>not valid
    JSON (...)"`` when it does not parse."""
    try:
        return parse_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: {missing}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what or 'it'}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{path}: {what + ' is ' if what else ''}not valid JSON ({exc})") from None
    except JSONLimitError as exc:
        raise error(f"{path}: {what + ' is ' if what else ''}JSON past engine's limits: {exc}") from None


def check_out_file(path: Path, *, force: bool, is_ours, what: str) -> None:
    """``--out FILE`` of a command that writes one file: absent; a regular file that ``is_ours(path)``
    says engine wrote (``what``: e.g. "an engine tokenizer file"); or, with ``--force``, any regular
    file. A device node, FIFO, folder or symbolic link is never replaced, ``--force`` or not
    (ConfigurationError naming it)."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # nothing there to replace; writing it says why it cannot
        return
    except OSError as exc:
        raise ConfigurationError(f"--out {path}: cannot inspect it ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a symbolic link" if stat.S_ISLNK(info.st_mode) else "a folder" if stat.S_ISDIR(info.st_mode)
                else "a device node" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "a FIFO" if stat.S_ISFIFO(info.st_mode) else "not a regular file")
        raise ConfigurationError(f"--out {path}: exists and is {kind}; engine only ever replaces regular files it "
                                 "wrote (give another --out)")
    if not force and not is_ours(path):
        raise ConfigurationError(f"--out {path}: exists and is not {what}; pass --force to replace it")


def check_output_folder(out_dir: Path, own: tuple[str, ...], what: str) -> None:
    """``--out`` of a command that writes only the files ``own``: a new folder, or an earlier output
    of ``what`` holding nothing else. Anything else (a token store, an unrelated folder) is a
    ConfigurationError, so writing the files there never replaces or mixes with what is not ours."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigurationError(f"--out {out_dir}: exists and is not a directory")
    if out_dir.is_dir():
        foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in own)
        if foreign:
            raise ConfigurationError(
                f"--out {out_dir}: holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, not only "
                f"{' and '.join(own)}; expected a new directory or an earlier `{what}` output"
            )
