"""engine: corpus -> tokenizer -> token store -> windows, batches, packed rows and masks."""

from engine.audit import AuditReport, audit_epoch
from engine.block_masks import BlockMaskTensors, block_mask_tensors
from engine.batches import BatchOrder, MiniBatch, MiniBatchConfig, MiniBatchEpoch, Provenance
from engine.buffers import TokenBuffers
from engine.corpus import Corpus, CorpusPartitions, Document, Partition, ReadReport, SplitManifest, hash_partition
from engine.errors import (
    BatchError,
    ConfigurationError,
    CorpusError,
    DeviceError,
    EngineError,
    PackingError,
    StoreError,
    TokenizerError,
)
from engine.loss import TokenMeanAccumulator
from engine.masks import attention_mask, cu_seqlens, loss_mask, mask_buffer, max_seqlen, position_ids, varlen_boundaries
from engine.mixing import Mixture, MixtureBatch
from engine.packed import PackedAudit, PackedEpoch, PackedEpochBatch, epoch_seed
from engine.packing import PackedBatch, PackingPlan, pack_documents, plan_packing
from engine.pipeline import PrepareResult, prepare
from engine.store import EncodedDocument, TokenStore, TokenStoreWriter
from engine.tokenizers import (
    BpeTokenizer,
    BpeTrainer,
    ByteBpeTokenizer,
    ByteBpeTrainer,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
    fit_tokenizer,
    load_hf_tokenizer_json,
    load_tiktoken,
    load_tokenizer,
    pretokenize,
    save_hf_tokenizer_json,
    save_tiktoken,
)
from engine.windows import (
    CausalWindowConfig,
    IncompleteTail,
    SampledBatch,
    Window,
    document_window_counts,
    enumerate_windows,
    gather_windows,
    sample_windows,
    window_prefix_sums,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "AuditReport",
    "BatchError",
    "BatchOrder",
    "BlockMaskTensors",
    "BpeTokenizer",
    "BpeTrainer",
    "ByteBpeTokenizer",
    "ByteBpeTrainer",
    "CausalWindowConfig",
    "CharTokenizer",
    "ConfigurationError",
    "Corpus",
    "CorpusError",
    "CorpusPartitions",
    "DeviceError",
    "Document",
    "EncodedDocument",
    "EngineError",
    "IncompleteTail",
    "MiniBatch",
    "MiniBatchConfig",
    "MiniBatchEpoch",
    "Mixture",
    "MixtureBatch",
    "PackedAudit",
    "PackedBatch",
    "PackedEpoch",
    "PackedEpochBatch",
    "PackingError",
    "PackingPlan",
    "Partition",
    "PrepareResult",
    "Provenance",
    "ReadReport",
    "SampledBatch",
    "SplitManifest",
    "StoreError",
    "TokenBuffers",
    "TokenMeanAccumulator",
    "TokenStore",
    "TokenStoreWriter",
    "Tokenizer",
    "TokenizerError",
    "Window",
    "WordTokenizer",
    "attention_mask",
    "audit_epoch",
    "block_mask_tensors",
    "cu_seqlens",
    "document_window_counts",
    "enumerate_windows",
    "epoch_seed",
    "fit_tokenizer",
    "gather_windows",
    "hash_partition",
    "load_hf_tokenizer_json",
    "load_tiktoken",
    "load_tokenizer",
    "loss_mask",
    "mask_buffer",
    "max_seqlen",
    "pack_documents",
    "plan_packing",
    "position_ids",
    "prepare",
    "pretokenize",
    "sample_windows",
    "save_hf_tokenizer_json",
    "save_tiktoken",
    "varlen_boundaries",
    "window_prefix_sums",
]
