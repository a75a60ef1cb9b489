"""engine: corpus -> tokenizer -> token store -> windows, batches, packed rows and masks."""

from engine.corpus import Document, Partition
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
from engine.store import EncodedDocument
from engine.tokenizers import Tokenizer, load_tokenizer

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "BatchError",
    "ConfigurationError",
    "CorpusError",
    "DeviceError",
    "Document",
    "EncodedDocument",
    "EngineError",
    "PackingError",
    "Partition",
    "StoreError",
    "Tokenizer",
    "TokenizerError",
    "load_tokenizer",
]
