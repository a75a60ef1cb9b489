"""Tokenizers: character, word, BPE (character and byte level), interop and statistics.

What every tokenizer honours (each kind's module states its own rule: ``char``, ``word``, ``bpe``,
``byte_bpe``, ``interop``; the comparison table and statistics are ``stats``):

- An encoded document is ``[BOS, content..., EOS]``; an empty text encodes as ``[BOS, EOS]``. Token
  ids are uint32. A tokenizer trained here puts its specials first (``<bos>`` = 0, ``<eos>`` = 1),
  then its own ids; an imported tokenizer keeps the ids of its file and names which of its special
  tokens wrap documents (they may be one token, GPT-2 style).
- It is fitted on the training partition only, frozen afterwards, saved to one JSON file with a
  content hash (``engine.tokenizers.base``), and reloads to identical behaviour.
- It decodes byte-exactly: ``decode(encode(t)) == t`` for every text it accepts.
- Unknown input is an explicit ``UnknownInputError`` naming the character, the document id and the
  offset, never a silent reuse of another id; a word tokenizer may instead be built with an explicit
  ``<unk>`` token, and then counts what it maps there. Byte level has no unknown input.
- The text of a special token inside a document is ordinary text: encoding never produces a
  special id, so a corpus cannot inject control tokens. Text that means its special tokens (a
  rendered chat template) goes through ``hf_pipeline.encode_with_specials(tokenizer, text)``.

``hf_pipeline`` reads Hugging Face ``tokenizer.json`` BPE pipelines and model folders (kind ``hf-bpe``).
"""

from engine.tokenizers.base import Tokenizer
from engine.tokenizers.bpe import BpeTokenizer, BpeTrainer, fit_tokenizer
from engine.tokenizers.byte_bpe import ByteBpeTokenizer, ByteBpeTrainer
from engine.tokenizers.hf_pipeline import HfBpeTokenizer, encode_with_specials
from engine.tokenizers.interop import load_hf_tokenizer_json, load_tiktoken, save_hf_tokenizer_json, save_tiktoken
from engine.tokenizers.loading import load_tokenizer
from engine.tokenizers.pretokenize import pretokenize, pretokenize_bytes
from engine.tokenizers.regex import Regex, compile_regex
from engine.tokenizers.char import CharTokenizer
from engine.tokenizers.word import WordTokenizer

__all__ = [
    "BpeTokenizer",
    "BpeTrainer",
    "ByteBpeTokenizer",
    "ByteBpeTrainer",
    "CharTokenizer",
    "HfBpeTokenizer",
    "Regex",
    "Tokenizer",
    "WordTokenizer",
    "compile_regex",
    "encode_with_specials",
    "fit_tokenizer",
    "load_tokenizer",
    "load_hf_tokenizer_json",
    "load_tiktoken",
    "pretokenize",
    "pretokenize_bytes",
    "save_hf_tokenizer_json",
    "save_tiktoken",
]
