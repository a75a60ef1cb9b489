"""Documents, corpus readers and split manifests (the split rules: engine.corpus.splits).

- ``engine.corpus.readers``: ``Document``, ``ReadReport``, the streaming readers (JSONL, Parquet and
  Arrow IPC, folders of text files, one continuous text) and ``open_corpus``, the one dispatch by
  format that ``Corpus.from_path`` and ``prepare`` share;
- ``engine.corpus.shards``: what a corpus path names (one file, a folder or glob of shards, a
  ``datasets`` folder, a folder of text files) and ``--corpus-format``;
- ``engine.corpus.compressed``: gzip, zstandard, bzip2 and xz files read as streams;
- ``engine.corpus.jsonl``: the JSONL reader (plain, compressed or sharded);
- ``engine.corpus.limits``: ``ReadLimits``, the sizes the readers cut their work into;
- ``engine.corpus.collection``: ``Corpus``, the documents in memory, in order, indexed by id;
- ``engine.corpus.splits``: ``Partition``, ``SplitManifest`` (lists or a hash rule),
  ``ManifestCheck`` (the manifest's rules over streamed documents) and ``CorpusPartitions``
  (including the positional split of one continuous text);
- ``engine.corpus.fit_sample``: ``FitSample``, the start of the train partition a bounded fit reads
  (``--fit-sample BYTES``).
"""

from types import ModuleType as _ModuleType

from engine.corpus.collection import Corpus
from engine.corpus.limits import ReadLimits
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
    read_shards,
    read_text_file,
)
from engine.corpus.shards import CorpusShards, corpus_shards
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

# The package's public names: everything imported above (its submodules aside).
__all__ = sorted(name for name, value in dict(globals()).items()
                 if not name.startswith("_") and not isinstance(value, _ModuleType))
