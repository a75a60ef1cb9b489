"""The one exception root and its subclasses.

Every message says what was wrong, where (file, line, document id, offset, coordinate) and what
was expected. Bad input never leaves partial output behind and never changes data already
written. The CLI turns an ``EngineError`` into one line on stderr and exit status 2.
"""

from __future__ import annotations

__all__ = [
    "EngineError",
    "ConfigurationError",
    "CorpusError",
    "TokenizerError",
    "StoreError",
    "BatchError",
    "PackingError",
    "DeviceError",
    "is_interrupt",
]


class EngineError(Exception):
    """Root of every error engine raises on purpose (bad input, bad files, bad configuration)."""


class ConfigurationError(EngineError, ValueError):
    """A parameter is out of range or two options conflict (T, S, batch size, row length, seed...)."""


class CorpusError(EngineError):
    """A corpus or split manifest is malformed: bad JSONL, missing or duplicate ids, bad UTF-8."""


class TokenizerError(EngineError):
    """A tokenizer cannot be fitted, loaded, or applied (unknown character, corrupt file...)."""


class StoreError(EngineError):
    """A token store is missing, corrupt, or belongs to another tokenizer."""


class BatchError(EngineError):
    """Documents cannot form an epoch (wrong partition, repeated or empty ids) or a batch is out of range."""


class PackingError(EngineError):
    """Documents or role flags cannot be packed into rows as asked."""


class DeviceError(EngineError):
    """A device was requested that this machine does not have (e.g. ``device="cuda"`` without a GPU)."""


def is_interrupt(exc: BaseException | None) -> bool:
    """Whether ``exc`` is an interrupt (SIGINT, Ctrl-C): a ``KeyboardInterrupt``, or the
    ``SystemError`` ("returned a result with an exception set") Numba raises instead when the signal
    arrives while a kernel runs on the main thread; its cause is the ``KeyboardInterrupt``."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    return isinstance(exc, SystemError) and isinstance(exc.__cause__, KeyboardInterrupt)
