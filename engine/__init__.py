"""engine: corpus -> tokenizer -> token store -> windows, batches, packed rows and masks.

Names are imported on first use (PEP 562), so ``import engine`` and the CLI's start-up stay cheap
and an interrupt while the heavy modules (Numba, pyarrow) load is handled by the CLI. Subpackages and
modules are attributes the same way: ``import engine; engine.tokenizers.load_tiktoken(...)`` imports
``engine.tokenizers`` on that first use (``engine.torch`` imports torch only when it is used).
"""

import importlib
import importlib.util

# What a user needs, by area; everything else stays importable from its module (``engine.masks.mask_buffer``,
# ``engine.tokenizers.load_tiktoken``, ``engine.epoch_index.save_epoch_index``, ...).
_EXPORTS = {
    # corpus and splits
    "Corpus": "engine.corpus",
    "Document": "engine.corpus",
    "Partition": "engine.partition",
    "SplitManifest": "engine.corpus",
    # the prepare pipeline
    "prepare": "engine.pipeline",
    "PrepareOptions": "engine.pipeline",
    # tokenizers
    "Tokenizer": "engine.tokenizers",
    "CharTokenizer": "engine.tokenizers",
    "WordTokenizer": "engine.tokenizers",
    "BpeTokenizer": "engine.tokenizers",
    "BpeTrainer": "engine.tokenizers",
    "ByteBpeTokenizer": "engine.tokenizers",
    "ByteBpeTrainer": "engine.tokenizers",
    "load_tokenizer": "engine.tokenizers",
    # token store and buffers
    "TokenStore": "engine.store",
    "EncodedDocument": "engine.store",
    "TokenBuffers": "engine.buffers",
    # trainers' formats
    "export_megatron": "engine.export",
    "export_flat": "engine.export",
    "open_megatron": "engine.megatron",
    # windows, batches, packing, mixtures
    "CausalWindowConfig": "engine.windows",
    "MiniBatchConfig": "engine.batches",
    "BatchOrder": "engine.batches",
    "MiniBatchEpoch": "engine.batches",
    "pack_documents": "engine.packing",
    "PackedEpoch": "engine.packed",
    "Mixture": "engine.mixing",
    # masks, loss, audit
    "attention_mask": "engine.masks",
    "position_ids": "engine.masks",
    "varlen_boundaries": "engine.masks",
    "block_mask_tensors": "engine.block_masks",
    "TokenMeanAccumulator": "engine.loss",
    "audit_epoch": "engine.audit",
    # errors
    "EngineError": "engine.errors",
    "ConfigurationError": "engine.errors",
    "CorpusError": "engine.errors",
    "TokenizerError": "engine.errors",
    "StoreError": "engine.errors",
    "BatchError": "engine.errors",
    "PackingError": "engine.errors",
    "DeviceError": "engine.errors",
}

__version__ = "0.1.0"

__all__ = ["__version__", *sorted(_EXPORTS, key=str.lower)]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")  # importing a submodule binds it here
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
