"""The token store: Parquet dataset partitioned by split, zero-copy views (SPEC §4)."""

from engine.store.writer import *  # noqa: F401,F403
from engine.store.writer import MANIFEST_NAME, __all__  # noqa: F401
