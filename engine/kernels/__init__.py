"""Numba CPU kernels. Importing the package first makes their cache entries depend on every
kernel source (``engine.kernel_cache``), before any kernel module is decorated."""

from engine.kernel_cache import register

register()
