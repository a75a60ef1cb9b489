"""Tokenizers: character, word, BPE (character and byte level), interop and statistics."""

from engine.tokenizers.base import Tokenizer, load_tokenizer

__all__ = ["Tokenizer", "load_tokenizer"]
