"""Tokenizers: character, word, BPE (character and byte level), interop and statistics."""

from engine.tokenizers.base import Tokenizer, load_tokenizer
from engine.tokenizers.bpe import BpeTokenizer, BpeTrainer, fit_tokenizer
from engine.tokenizers.char import CharTokenizer
from engine.tokenizers.word import WordTokenizer

__all__ = [
    "BpeTokenizer",
    "BpeTrainer",
    "CharTokenizer",
    "Tokenizer",
    "WordTokenizer",
    "fit_tokenizer",
    "load_tokenizer",
]
