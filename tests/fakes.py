"""A tiny real Tokenizer for store tests and the store benchmark: id = UTF-8 byte + 2.

``salt`` only changes the hash (for tests of a hash mismatch).
"""

from __future__ import annotations

import numpy as np

from engine.tokenizers.base import Tokenizer, register_tokenizer


@register_tokenizer
class ByteIdsTokenizer(Tokenizer):
    """UTF-8 bytes shifted past the specials (BOS 0, EOS 1): id = byte + 2."""

    kind = "test-byte-ids"

    def __init__(self, salt: str = ""):
        self.salt = salt

    def _encode(self, text, document_id):
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.uint32) + 2

    def decode(self, ids):
        return bytes(int(i) - 2 for i in ids if int(i) >= 2).decode("utf-8")

    def tokenize(self, text):
        return list(text)

    @property
    def vocab_size(self):
        return 258

    def _payload(self):
        return {"salt": self.salt}

    @classmethod
    def _from_payload(cls, payload):
        return cls(payload["salt"])


def fail_saves_into(monkeypatch, folder) -> None:
    """Make ``Tokenizer.save`` fail (disk full) for files right in ``folder`` (``OUT/tokenizer.json`` and its
    staged temporary), not for the store's own copy."""
    real_save = Tokenizer.save

    def save(self, path):
        if path.parent == folder:
            raise OSError(28, "No space left on device (injected)")
        return real_save(self, path)

    monkeypatch.setattr(Tokenizer, "save", save)
