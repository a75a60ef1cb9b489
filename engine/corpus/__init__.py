"""Documents, partitions, corpus readers and split manifests (SPEC §2)."""

from engine.corpus.readers import *  # noqa: F401,F403
from engine.corpus.readers import (  # noqa: F401
    __all__, ARROW_SUFFIXES, _at_lines, _forgotten_where, _is_hidden, _json_lines,
)
