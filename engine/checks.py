"""Integer arguments at public boundaries: one check, so every site says the same thing."""

from __future__ import annotations

import operator

from engine.errors import ConfigurationError


def as_int(value, name: str, *, expected: str = "an integer") -> int:
    """``value`` as a Python int (any integer type, never a bool), else ConfigurationError
    ``"<name> must be <expected>, got ..."``. Range checks stay with the caller."""
    if isinstance(value, bool):
        raise ConfigurationError(f"{name} must be {expected}, got the boolean {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ConfigurationError(f"{name} must be {expected}, got {type(value).__name__} {value!r}") from None
