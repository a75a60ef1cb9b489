"""``load_tokenizer``: any tokenizer file, recognised by its content.

An engine file (``Tokenizer.save``, rebuilt by ``engine.tokenizers.base.tokenizer_from_json``), a
Hugging Face ``tokenizer.json`` with a BPE model or a model folder holding one
(``engine.tokenizers.hf_pipeline.load_hf_file``), a tiktoken rank file or Mistral's ``tekken.json``
(``engine.tokenizers.interop``),
or a SentencePiece ``.model`` file (a protobuf ``ModelProto``, ``engine.tokenizers.sentencepiece``).
It sits above them all: interop builds byte-level BPE tokenizers on
``base``, so the dispatch over every format lives here rather than in ``base``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from engine.checks import JSONLimitError, parse_json
from engine.errors import ConfigurationError, TokenizerError
from engine.tokenizers.base import Tokenizer, _import_kinds, tokenizer_from_json
from engine.tokenizers.hf_pipeline import is_hf_file, load_hf_file
from engine.tokenizers.interop import load_tiktoken
from engine.tokenizers.pretokenize import canonical_pattern
from engine.tokenizers.sentencepiece import SentencePieceTokenizer
from engine.tokenizers.spm_model import looks_like_model, parse_model

__all__ = ["load_tokenizer"]


def load_tokenizer(path: str | os.PathLike, *, pattern: str | None = None) -> Tokenizer:
    """Load a tokenizer file, recognised by its content: an engine file (``Tokenizer.save``), a
    Hugging Face ``tokenizer.json`` with a BPE model (or a model folder: ``tokenizer.json`` with
    ``tokenizer_config.json`` / ``special_tokens_map.json``), a tiktoken rank file
    (``<base64 token> <rank>`` lines), Mistral's ``tekken.json`` (ranks and their regex), or a
    SentencePiece ``.model`` file of type BPE (a protobuf ModelProto,
    ``engine.tokenizers.sentencepiece``). A tiktoken file does not name its pre-tokenizer:
    ``pattern`` (a name or any regex) does, else it is ``cl100k`` for a file of exactly 100,256
    ranks (cl100k_base), ``o200k`` for one of exactly 199,998 ranks (o200k_base) and ``gpt2``
    otherwise. Files without special tokens get ``<|endoftext|>`` after the last id
    (``tokenizer.notes`` says so); an empty token (``=``, as Whisper's files reserve a rank) is a
    reserved id that no text encodes to."""
    _import_kinds()  # registered before dispatching on "kind"
    path = Path(path)
    if path.is_dir():  # a model folder: tokenizer.json and its tokenizer_config.json / special_tokens_map.json
        return _check_pattern(load_hf_file(path), pattern, path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TokenizerError(f"{path}: tokenizer file not found") from None
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read tokenizer file: {exc.strerror}") from None
    if looks_like_model(raw):
        if pattern is not None:
            raise ConfigurationError(f"{path}: pattern= / --pattern {pattern} applies to a tiktoken rank file; a "
                                     "SentencePiece model has no pre-tokenizer pattern")
        return SentencePieceTokenizer(parse_model(raw, str(path)), source=str(path))
    if _looks_like_tiktoken(raw):
        ranks = sum(1 for line in raw.splitlines() if line.strip())
        chosen = pattern or {100_256: "cl100k", 199_998: "o200k"}.get(ranks, "gpt2")
        tok = load_tiktoken(path, pattern=chosen)
        tok.notes = (f"tiktoken rank file: pre-tokenizer pattern {chosen}"
                     + ("" if pattern else " (pattern= / --pattern chooses another)"), *tok.notes)
        return tok
    try:
        obj = parse_json(raw.decode("utf-8"))
    except JSONLimitError as exc:
        raise TokenizerError(f"{path}: tokenizer file is JSON past engine's limits: {exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        if raw.lstrip()[:1] in (b"{", b"["):
            raise TokenizerError(f"{path}: tokenizer file is not valid JSON ({exc}); is it truncated?") from None
        raise TokenizerError(f"{path}: not a tokenizer file: expected JSON (an engine file or a Hugging Face "
                             "tokenizer.json), a SentencePiece .model file or a tiktoken rank file "
                             "('<base64 token> <rank>' lines)") from None
    if is_hf_file(obj):  # a tokenizer.json or a tekken.json
        tok = load_hf_file(path, data=obj)
    else:
        tok = tokenizer_from_json(obj, str(path))
    return _check_pattern(tok, pattern, path)


def _check_pattern(tok: Tokenizer, pattern: str | None, path: Path) -> Tokenizer:
    own = getattr(tok, "pattern", None)
    if pattern is not None and canonical_pattern(pattern) != own:
        raise ConfigurationError(f"{path}: pattern= / --pattern {pattern} applies to a tiktoken rank file, which "
                                 "names no pre-tokenizer; this file fixes its own "
                                 f"({own or 'none: it is no byte-level BPE'})")
    return tok


_TIKTOKEN_LINE = re.compile(rb"(?:[A-Za-z0-9+/]+=*|=)[ \t]+[0-9]+")  # "=": the empty token of a reserved rank


def _looks_like_tiktoken(raw: bytes) -> bool:
    """True when the first non-empty line is ``<base64> <rank>`` (JSON never starts that way)."""
    for line in raw[:4096].splitlines():
        if line.strip():
            return _TIKTOKEN_LINE.fullmatch(line.strip()) is not None
    return False
