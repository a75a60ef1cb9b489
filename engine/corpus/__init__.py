"""Documents, corpus readers and split manifests (SPEC §2).

- ``engine.corpus.readers``: ``Document``, ``ReadReport``, the streaming readers (JSONL, Parquet and
  Arrow IPC, folders of text files, one continuous text) and ``open_corpus``, the one dispatch by
  format that ``Corpus.from_path`` and ``prepare`` share;
- ``engine.corpus.collection``: ``Corpus``, the documents in memory, in order, indexed by id;
- ``engine.corpus.splits``: ``Partition``, ``SplitManifest`` (lists or a hash rule),
  ``ManifestCheck`` (the manifest's rules over streamed documents) and ``CorpusPartitions``
  (including the positional split of one continuous text).
"""

from engine.corpus.collection import Corpus
from engine.corpus.readers import (
    ARROW_SUFFIXES,
    CORPUS_FORMATS,
    INVALID_UTF8_POLICIES,
    PARQUET_BATCH_SIZE,
    Document,
    ReadReport,
    check_columns_apply,
    corpus_format,
    is_continuous_text,
    iter_folder,
    iter_jsonl,
    iter_parquet,
    iter_parquet_batches,
    open_corpus,
    read_text_file,
)
from engine.corpus.splits import (
    PARTITIONS,
    CorpusPartitions,
    ManifestCheck,
    Partition,
    SplitManifest,
    as_partition,
    hash_partition,
    hash_unit,
)

__all__ = [
    "Partition",
    "Document",
    "Corpus",
    "ReadReport",
    "iter_jsonl",
    "iter_parquet",
    "iter_parquet_batches",
    "iter_folder",
    "read_text_file",
    "open_corpus",
    "check_columns_apply",
    "corpus_format",
    "is_continuous_text",
    "SplitManifest",
    "ManifestCheck",
    "CorpusPartitions",
    "hash_partition",
    "hash_unit",
    "as_partition",
    "PARTITIONS",
]
