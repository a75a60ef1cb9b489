"""Plain-loop twins of every kernel: slow, obvious, and the reference the tests compare against.

Each area keeps its twins in ``tests/naive_<area>.py``; this module gathers them under one name.
"""

from tests.naive_parts import *  # noqa: F401,F403
