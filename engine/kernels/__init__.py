"""Numba CPU kernels. Importing the package first makes their cache entries depend on every
kernel source (``engine.kernel_cache``), before any kernel module is decorated.

Every kernel is decorated with ``kernel`` (``@kernel`` or ``@kernel(inline="always")``): Numba's
``njit`` with the options all kernels share. Cached on disk, so a process compiles a kernel only
when no earlier one did; ``nogil``, so threads run kernels side by side; and without the C callback
wrapper Numba would otherwise compile beside each kernel (no kernel is passed as a function value),
a few percent of every first compile.

``@kernel(leaf=True)`` compiles a kernel that creates no array without Numba's reference counting
(its ``_nrt`` flag off, ``engine.numba_internals``). Numba counts references to every array a
function holds: an atomic increment where an inlined helper takes an array, a decrement where it is
done with it, which its pruning pass leaves in place around loops. In a per-piece loop those
atomics cost a quarter to a third of the byte-level encoder's time, keep the loop's cache misses
from overlapping, and make threads that share a table fight over the cache line of its count. A
leaf kernel may not create arrays (Numba refuses to compile one that does) and may call any kernel
that returns none: every other kernel sets the flag on explicitly, so it keeps its reference counts
(and may allocate) whoever calls it, where Numba would otherwise compile a callee with its caller's
setting. Helpers inlined into a leaf (``inline="always"``) become part of it.
"""

from numba import njit

from engine.kernel_cache import register
from engine.numba_internals import NO_REFCOUNT_OPTION

register()

KERNEL_OPTIONS = {"cache": True, "nogil": True, "no_cfunc_wrapper": True}


def kernel(function=None, *, leaf: bool = False, **options):
    """``numba.njit`` with ``KERNEL_OPTIONS`` (and ``options``, e.g. ``inline="always"``, ``parallel=True``);
    ``leaf``: without reference counting (above)."""
    options[NO_REFCOUNT_OPTION] = not leaf
    decorate = njit(**KERNEL_OPTIONS, **options)
    return decorate if function is None else decorate(function)
