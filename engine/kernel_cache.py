"""The freshness rule of the kernels' on-disk Numba cache.

Numba keys a cached kernel on its own source file only, but a kernel's machine code also holds the
kernels it calls from other files (``bpe_train`` inlines ``bpe_encode`` and ``heap``): after an
edit to ``heap.py`` alone, the cached ``train_merges`` would keep the old heap. Importing
``engine.kernels`` therefore registers (through this module) cache locators, used for the modules
of ``engine/kernels/`` only, whose source stamp is one digest of every ``*.py`` file there and the
engine version. Any change to any kernel source (an upgrade, a local edit) invalidates every cached
kernel of the engine, and the next run recompiles what it uses. The cache directories are Numba's own (``NUMBA_CACHE_DIR``, else
``__pycache__`` beside the sources, else the user-wide cache).
"""

from __future__ import annotations

import hashlib
import os

from engine import numba_internals as internals

KERNEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")


def sources_digest(directory: str = KERNEL_DIR, version: str | None = None) -> str:
    """sha256 over the engine version and the names and bytes of every ``*.py`` file in ``directory``."""
    if version is None:
        from engine import __version__ as version
    digest = hashlib.sha256(f"engine {version}\0".encode())
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py"):
            with open(os.path.join(directory, name), "rb") as source:
                data = source.read()
            digest.update(f"{name}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()


_digest: str | None = None


def _kernels_stamp() -> str:
    global _digest
    if _digest is None:
        _digest = sources_digest()
    return _digest


class _KernelSourcesStamp:
    """Locator mixin: only for files of ``engine/kernels/``; the stamp covers all of them."""

    def get_source_stamp(self):
        return _kernels_stamp()

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.path.dirname(os.path.abspath(py_file)) != KERNEL_DIR:
            return None
        return super().from_function(py_func, py_file)


class UserProvidedKernelLocator(_KernelSourcesStamp, internals.UserProvidedCacheLocator):
    """``NUMBA_CACHE_DIR``, when set."""


class InTreeKernelLocator(_KernelSourcesStamp, internals.InTreeCacheLocator):
    """``__pycache__`` beside the sources, when writable."""


class UserWideKernelLocator(_KernelSourcesStamp, internals.UserWideCacheLocator):
    """The user-wide Numba cache directory."""


KERNEL_LOCATORS = (UserProvidedKernelLocator, InTreeKernelLocator, UserWideKernelLocator)


def register() -> None:
    """Put the kernel locators first in Numba's list (idempotent); before any kernel is decorated."""
    classes = internals.CacheImpl._locator_classes
    for locator in reversed(KERNEL_LOCATORS):
        if locator not in classes:
            classes.insert(0, locator)

