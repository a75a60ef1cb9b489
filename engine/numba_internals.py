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
- ``numba.core.cgutils``' ``get_item_pointer`` and ``get_or_insert_function``, and the target
  context's ``make_array`` and ``get_dummy_value``, used by the prefetch and non-temporal store
  intrinsics' code generators (``engine.kernels.shuffle``, ``engine.kernels.masks``);
- a dispatcher's ``overloads`` (signature tuple to compile result) and a compile result's
  ``entry_point``: ``engine.batches`` calls a kernel's compiled entry point directly on the hot path
  of ``batch(k, out=...)``, skipping the per-call type dispatch.
"""

from __future__ import annotations

import numba
from numba.core import base, caching, cgutils, compiler, event
from numba.core import dispatcher as _dispatcher

TESTED_NUMBA = ((0, 68),)
"""(major, minor) releases of numba these internals were tested on; pyproject bounds numba to them."""

COMPILE_EVENT = "numba:compile"


def _missing(module, names: tuple[str, ...]) -> list[str]:
    return [f"{module.__name__}.{name}" for name in names if not hasattr(module, name)]


def check(caching=caching, event=event, cgutils=cgutils, compiler=compiler,
          dispatcher=_dispatcher, base=base) -> None:
    """Raise ``ImportError`` naming every internal above that this Numba lacks (the modules are
    parameters so a test can hand in stand-ins)."""
    missing = _missing(caching, ("UserProvidedCacheLocator", "InTreeCacheLocator",
                                 "UserWideCacheLocator", "CacheImpl"))
    if hasattr(caching, "CacheImpl") and not isinstance(getattr(caching.CacheImpl, "_locator_classes", None), list):
        missing.append(f"{caching.__name__}.CacheImpl._locator_classes")
    for name in ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator"):
        locator = getattr(caching, name, None)
        if locator is not None:
            missing += [f"{caching.__name__}.{name}.{method}" for method in ("from_function", "get_source_stamp")
                        if not hasattr(locator, method)]
    missing += _missing(event, ("Listener", "register"))
    missing += _missing(cgutils, ("get_item_pointer", "get_or_insert_function"))
    context = getattr(base, "BaseContext", None)
    missing += [f"{base.__name__}.BaseContext.{name}" for name in ("make_array", "get_dummy_value")
                if not hasattr(context, name)]
    fields = getattr(getattr(compiler, "CompileResult", None), "_fields", ())
    if "entry_point" not in fields:
        missing.append(f"{compiler.__name__}.CompileResult.entry_point")
    base = getattr(dispatcher, "_DispatcherBase", None)
    code = getattr(getattr(base, "__init__", None), "__code__", None)
    if code is None or "overloads" not in code.co_names:
        missing.append(f"{dispatcher.__name__}._DispatcherBase.overloads")
    if "no_cfunc_wrapper" not in getattr(getattr(compiler, "Flags", None), "options", ()):
        missing.append(f"{compiler.__name__}.Flags.no_cfunc_wrapper")
    if missing:
        tested = ", ".join(f"{major}.{minor}" for major, minor in TESTED_NUMBA)
        raise ImportError(
            f"engine needs Numba internals that numba {numba.__version__} lacks: {', '.join(missing)}; "
            f"engine is tested with numba {tested} (pip install 'numba>={tested},<{TESTED_NUMBA[-1][0]}."
            f"{TESTED_NUMBA[-1][1] + 1}')")


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
