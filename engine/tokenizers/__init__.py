"""Tokenizers: character, word, BPE (character and byte level), interop and statistics."""

from engine.tokenizers.base import Tokenizer
from engine.tokenizers.bpe import BpeTokenizer, BpeTrainer, fit_tokenizer
from engine.tokenizers.byte_bpe import ByteBpeTokenizer, ByteBpeTrainer
from engine.tokenizers.interop import load_hf_tokenizer_json, load_tiktoken, save_hf_tokenizer_json, save_tiktoken
from engine.tokenizers.loading import load_tokenizer
from engine.tokenizers.pretokenize import pretokenize, pretokenize_bytes
from engine.tokenizers.char import CharTokenizer
from engine.tokenizers.word import WordTokenizer

__all__ = [
    "BpeTokenizer",
    "BpeTrainer",
    "ByteBpeTokenizer",
    "ByteBpeTrainer",
    "CharTokenizer",
    "Tokenizer",
    "WordTokenizer",
    "fit_tokenizer",
    "load_tokenizer",
    "load_hf_tokenizer_json",
    "load_tiktoken",
    "pretokenize",
    "pretokenize_bytes",
    "save_hf_tokenizer_json",
    "save_tiktoken",
]
