"""engine: corpus -> tokenizer -> token store -> windows, batches, packed rows and masks.

Names are imported on first use (PEP 562), so ``import engine`` and the CLI's start-up stay cheap
and an interrupt while the heavy modules (Numba, pyarrow) load is handled by the CLI.
"""

import importlib

_EXPORTS = {
    "AuditReport": "engine.audit",
    "BlockMaskTensors": "engine.block_masks",
    "block_mask_tensors": "engine.block_masks",
    "TokenBuffers": "engine.buffers",
    "Mixture": "engine.mixing",
    "MixtureBatch": "engine.mixing",
    "PackedAudit": "engine.packed",
    "PackedEpoch": "engine.packed",
    "PackedEpochBatch": "engine.packed",
    "epoch_seed": "engine.packed",
    "audit_epoch": "engine.audit",
    "BatchOrder": "engine.batches",
    "MiniBatch": "engine.batches",
    "MiniBatchConfig": "engine.batches",
    "MiniBatchEpoch": "engine.batches",
    "Provenance": "engine.batches",
    "Corpus": "engine.corpus",
    "CorpusPartitions": "engine.corpus",
    "Document": "engine.corpus",
    "Partition": "engine.corpus",
    "ReadReport": "engine.corpus",
    "SplitManifest": "engine.corpus",
    "hash_partition": "engine.corpus",
    "BatchError": "engine.errors",
    "ConfigurationError": "engine.errors",
    "CorpusError": "engine.errors",
    "DeviceError": "engine.errors",
    "EngineError": "engine.errors",
    "PackingError": "engine.errors",
    "StoreError": "engine.errors",
    "TokenizerError": "engine.errors",
    "TokenMeanAccumulator": "engine.loss",
    "attention_mask": "engine.masks",
    "cu_seqlens": "engine.masks",
    "loss_mask": "engine.masks",
    "mask_buffer": "engine.masks",
    "max_seqlen": "engine.masks",
    "position_ids": "engine.masks",
    "varlen_boundaries": "engine.masks",
    "PackedBatch": "engine.packing",
    "PackingPlan": "engine.packing",
    "pack_documents": "engine.packing",
    "plan_packing": "engine.packing",
    "PrepareResult": "engine.pipeline",
    "prepare": "engine.pipeline",
    "EncodedDocument": "engine.store",
    "TokenStore": "engine.store",
    "TokenStoreWriter": "engine.store",
    "BpeTokenizer": "engine.tokenizers",
    "BpeTrainer": "engine.tokenizers",
    "ByteBpeTokenizer": "engine.tokenizers",
    "ByteBpeTrainer": "engine.tokenizers",
    "CharTokenizer": "engine.tokenizers",
    "Tokenizer": "engine.tokenizers",
    "WordTokenizer": "engine.tokenizers",
    "fit_tokenizer": "engine.tokenizers",
    "load_hf_tokenizer_json": "engine.tokenizers",
    "load_tiktoken": "engine.tokenizers",
    "load_tokenizer": "engine.tokenizers",
    "pretokenize": "engine.tokenizers",
    "save_hf_tokenizer_json": "engine.tokenizers",
    "save_tiktoken": "engine.tokenizers",
    "CausalWindowConfig": "engine.windows",
    "IncompleteTail": "engine.windows",
    "SampledBatch": "engine.windows",
    "Window": "engine.windows",
    "document_window_counts": "engine.windows",
    "enumerate_windows": "engine.windows",
    "gather_windows": "engine.windows",
    "sample_windows": "engine.windows",
    "window_prefix_sums": "engine.windows",
}

__version__ = "0.1.0"

__all__ = ["__version__", *sorted(_EXPORTS, key=str.lower)]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
