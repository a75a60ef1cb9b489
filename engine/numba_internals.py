"""Every part of Numba engine uses beyond Numba's public API, in one place, checked at import.

Numba's documented API (``njit``, ``prange``, ``types``, ``typeof``, ``numba.extending``'s
``intrinsic`` and ``overload``) is imported where it is used. What follows is not documented and
can change in any Numba release, so it is reached only through this module, which checks on import
that each piece exists and raises ``ImportError`` naming the missing one (never a late
``AttributeError`` inside a kernel build). ``pyproject.toml`` bounds ``numba`` to the releases
these were tested on, ``TESTED_NUMBA``:

- ``numba.core.caching``: the cache locator classes (``UserProvidedCacheLocator``,
  ``InTreeCacheLocator``, ``UserWideCacheLocator``, their ``from_function`` and
  ``get_source_stamp``) and ``CacheImpl._locator_classes``, the list ``engine.kernel_cache``
  puts its locators in front of (the kernels' cache is keyed on every kernel source);
- ``numba.core.event``: ``Listener`` and ``register``, with the ``"numba:compile"`` event, which
  ``engine.progress`` listens to (it says when a first run compiles and leaves compile time out of
  rates);
- the ``njit`` option ``no_cfunc_wrapper`` (``engine.kernels.KERNEL_OPTIONS``: no C callback
  wrapper is compiled beside each kernel);
- the ``njit`` option ``_nrt`` (``NO_REFCOUNT_OPTION``), the compiler flag ``nrt``: ``kernel(leaf=True)``
  turns it off, so a kernel that allocates nothing runs without reference counting;
- ``numba.core.cgutils``' ``get_item_pointer`` and ``get_or_insert_function``, and the target
  context's ``make_array`` and ``get_dummy_value``, used by the prefetch and non-temporal store
  intrinsics' code generators (``engine.kernels.shuffle``, ``engine.kernels.masks``);
- a dispatcher's ``overloads`` (signature tuple to compile result) and a compile result's
  ``entry_point``: ``engine.batches`` calls a kernel's compiled entry point directly on the hot path
  of ``batch(k, out=...)``, skipping the per-call type dispatch.
"""

from __future__ import annotations

import numba
from numba.core import base, caching, cgutils, compiler, event, options
from numba.core import dispatcher as _dispatcher

TESTED_NUMBA = (0, 68)
"""The (major, minor) release of numba these internals were tested on; pyproject bounds numba to it."""

COMPILE_EVENT = "numba:compile"

NO_REFCOUNT_OPTION = "_nrt"
"""The ``njit`` option that, set to False, compiles a function without Numba's runtime (no reference counts)."""

_LOCATORS = ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator")


def _missing(owner, names, prefix: str) -> list[str]:
    return [f"{prefix}.{name}" for name in names if not hasattr(owner, name)]


def check(caching=caching, event=event, cgutils=cgutils, compiler=compiler,
          dispatcher=_dispatcher, base=base, options=options) -> None:
    """Raise ``ImportError`` naming every internal above that this Numba lacks (the modules are
    parameters so a test can hand in stand-ins)."""
    prefix = caching.__name__
    missing = _missing(caching, (*_LOCATORS, "CacheImpl"), prefix)
    if hasattr(caching, "CacheImpl") and not isinstance(getattr(caching.CacheImpl, "_locator_classes", None), list):
        missing.append(f"{prefix}.CacheImpl._locator_classes")
    for name in _LOCATORS:
        if hasattr(caching, name):
            missing += _missing(getattr(caching, name), ("from_function", "get_source_stamp"), f"{prefix}.{name}")
    missing += _missing(event, ("Listener", "register"), event.__name__)
    missing += _missing(cgutils, ("get_item_pointer", "get_or_insert_function"), cgutils.__name__)
    missing += _missing(getattr(base, "BaseContext", None), ("make_array", "get_dummy_value"),
                        f"{base.__name__}.BaseContext")
    if "entry_point" not in getattr(getattr(compiler, "CompileResult", None), "_fields", ()):
        missing.append(f"{compiler.__name__}.CompileResult.entry_point")
    for flag in ("no_cfunc_wrapper", "nrt"):
        if flag not in getattr(getattr(compiler, "Flags", None), "options", ()):
            missing.append(f"{compiler.__name__}.Flags.{flag}")
    if getattr(getattr(getattr(options, "DefaultOptions", None), NO_REFCOUNT_OPTION, None), "flag_name", None) != "nrt":
        missing.append(f"{options.__name__}.DefaultOptions.{NO_REFCOUNT_OPTION}")
    init = getattr(getattr(dispatcher, "_DispatcherBase", None), "__init__", None)
    if "overloads" not in getattr(getattr(init, "__code__", None), "co_names", ()):
        missing.append(f"{dispatcher.__name__}._DispatcherBase.overloads")
    if missing:
        major, minor = TESTED_NUMBA
        raise ImportError(
            f"engine needs Numba internals that numba {numba.__version__} lacks: {', '.join(missing)}; "
            f"engine is tested with numba {major}.{minor} (pip install 'numba>={major}.{minor},<{major}.{minor + 1}')")


check()

CacheImpl = caching.CacheImpl
UserProvidedCacheLocator = caching.UserProvidedCacheLocator
InTreeCacheLocator = caching.InTreeCacheLocator
UserWideCacheLocator = caching.UserWideCacheLocator
CompileListener = event.Listener
register_listener = event.register
get_item_pointer = cgutils.get_item_pointer
get_or_insert_function = cgutils.get_or_insert_function


def compiled_entry_point(kernel, argument_types: tuple):
    """The compiled entry point of dispatcher ``kernel`` for exactly ``argument_types`` (a tuple of
    Numba types), or None when it has not been compiled for them (or is no dispatcher)."""
    overloads = getattr(kernel, "overloads", None)
    if overloads is None:
        return None
    compiled = overloads.get(argument_types)
    return None if compiled is None else compiled.entry_point
