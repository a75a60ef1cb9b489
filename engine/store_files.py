"""The names of a token store's files and of ``engine prepare``'s output folder.

A leaf module (it imports nothing of engine): the corpus readers recognise a store or a ``prepare``
output inside a folder corpus by these names without importing the store, which imports the corpus.
``engine.store.layout`` re-exports them with the store's format.
"""

from __future__ import annotations

__all__ = ["MANIFEST_NAME", "TOKENIZER_NAME", "RESUME_NAME", "STORE_NAME", "LOCK_SUFFIX"]

# "_" prefix (like the tokenizer's): dataset readers (pyarrow.dataset, pq.read_table(DIR)) skip the
# file, so DIR reads as one Parquet dataset partitioned by split.
MANIFEST_NAME = "_engine.json"
TOKENIZER_NAME = "_tokenizer.json"
# Only inside a writer's temporary directory: per finished file, the digest of the source documents
# it was encoded from, so that a resumed run can prove the file belongs to its corpus.
RESUME_NAME = "_resume.json"
# ``engine prepare --out OUT`` writes its store to OUT/store (beside OUT/store.lock while it writes).
STORE_NAME = "store"
# ``DIR.lock`` beside a store ``DIR`` while a writer holds it.
LOCK_SUFFIX = ".lock"
