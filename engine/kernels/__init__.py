"""Numba CPU kernels. Importing the package first makes their cache entries depend on every
kernel source (``engine.kernel_cache``), before any kernel module is decorated.

Every kernel is decorated with ``kernel`` (``@kernel`` or ``@kernel(inline="always")``): Numba's
``njit`` with the options all kernels share. Cached on disk, so a process compiles a kernel only
when no earlier one did; ``nogil``, so threads run kernels side by side; and without the C callback
wrapper Numba would otherwise compile beside each kernel (no kernel is passed as a function value),
a few percent of every first compile.
"""

from numba import njit

from engine.kernel_cache import register

register()

KERNEL_OPTIONS = {"cache": True, "nogil": True, "no_cfunc_wrapper": True}


def kernel(function=None, **options):
    """``numba.njit`` with ``KERNEL_OPTIONS`` (and ``options``, e.g. ``inline="always"``, ``parallel=True``)."""
    decorate = njit(**KERNEL_OPTIONS, **options)
    return decorate if function is None else decorate(function)
