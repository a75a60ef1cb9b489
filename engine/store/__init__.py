"""The token store: Parquet dataset partitioned by split, zero-copy views.

The store rules (cited as "the store rules of engine.store"):

- one Parquet dataset directory partitioned by split (``split=train/...``), columns ``id: string``
  and ``tokens: large_list<uint32>``, one row per encoded document ``[BOS, content..., EOS]``;
  schema metadata records the tokenizer hash, the BOS/EOS ids and the format version; a store
  written without BOS (a model whose tokenizer has none, e.g. Qwen) holds ``[content..., EOS]``
  and records ``bos_id`` null (``"none"`` in the metadata);
- chat and instruction data add ``roles: large_list<uint8>``, one flag per token (1 = the model is
  trained to produce it, as long as the row's tokens); such a store is format version 2, its
  manifest says ``"roles": true``, and its documents are what their chat template rendered (or
  ``[BOS?] + prompt + completion + [EOS?]``), so no BOS/EOS rule applies to them;
- kernels read the list column's flat ``values`` (uint32) and ``offsets`` (int64) buffers zero-copy;
- reading windows or batches with a tokenizer whose hash differs from the store's is a ``StoreError``;
- writes are atomic (a temporary name, then a rename): an interrupted run leaves the previous
  store or none, never a half-written one that looks complete;
- documents are never concatenated into one flat stream in any public view: every view of the
  buffers carries the offsets that separate them, and windows restart at every document.

Layout of a store directory ``DIR``::

    DIR/split=train/part-00000.parquet        columns id: string, tokens: large_list<uint32>
                                              (and roles: large_list<uint8> in a version-2 store)
    DIR/split=validation/part-00000.parquet   (every split directory exists, maybe a zero-row file)
    DIR/split=test/part-00000.parquet
    DIR/_tokenizer.json                       the tokenizer that encoded it (Tokenizer.save)
    DIR/_engine.json                          manifest, written last: format version, tokenizer
                                              hash/bos/eos and vocab_size, per split documents,
                                              tokens and files (name, rows, bytes, sha256)

The manifest's ``vocab_size`` lets a reader that needs only the vocabulary's size (``engine
export``, for its dtype) skip loading the tokenizer; a store written before it was recorded (or by
a tokenizer that does not say) has none, and such a reader loads ``_tokenizer.json``.

Every Parquet file's schema metadata repeats ``engine.format_version``, ``engine.tokenizer_hash``,
``engine.bos_id`` and ``engine.eos_id``.

- ``engine.store.layout``: the names, format version and types above, and ``EncodedDocument``;
- ``engine.store.lock``: ``DIR.lock``, one writer at a time;
- ``engine.store.writer``: ``TokenStoreWriter``, atomic (temporary sibling renamed into place) and
  resumable;
- ``engine.store.reader``: ``TokenStore``, opened and checked, with zero-copy views of its buffers.
"""

from engine.store.layout import (
    CHUNK_DOCUMENTS,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST_NAME,
    ROW_GROUP_SIZE,
    TOKENIZER_NAME,
    TOKENS_TYPE,
    EncodedDocument,
)
from engine.store.reader import EncodedDocuments, TokenStore
from engine.store.writer import TokenStoreWriter

__all__ = ["EncodedDocument", "EncodedDocuments", "TokenStore", "TokenStoreWriter", "FORMAT_VERSION"]
