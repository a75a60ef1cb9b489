"""Shared fixtures of the chat tests: a byte-level BPE tokenizer.json built with the ``tokenizers``
library (trained on the bundled corpus, with chat special tokens added) and conversations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|eot_id|>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]


def build_tokenizer_json(path: Path, vocab_size: int = 700) -> Path:
    tokenizers = pytest.importorskip("tokenizers", reason="needs the test extra (tokenizers)")
    from tokenizers import models, pre_tokenizers, decoders, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    texts = [json.loads(line)["text"] for line in (ROOT / "data" / "corpus.jsonl").read_text().splitlines()]
    tok.train_from_iterator(texts, trainer)
    tok.save(str(path))
    return path


def model_folder(folder: Path, template: str, *, bos: str | None = "<|begin_of_text|>",
                 eos: str = "<|endoftext|>") -> Path:
    """A model folder: tokenizer.json plus tokenizer_config.json with ``template``."""
    folder.mkdir(parents=True, exist_ok=True)
    build_tokenizer_json(folder / "tokenizer.json")
    config = {"chat_template": template, "bos_token": bos, "eos_token": eos,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def hf_tokenizer(tokenizer_json: Path, template: str, bos: str | None = "<|begin_of_text|>",
                 eos: str = "<|endoftext|>"):
    transformers = pytest.importorskip("transformers", reason="needs the test extra (transformers)")
    kwargs = {"eos_token": eos}
    if bos is not None:
        kwargs["bos_token"] = bos
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json), **kwargs)
    tok.chat_template = template
    return tok


CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"},
     {"role": "assistant", "content": "Paris is the capital of France."}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "Say hello twice"},
     {"role": "assistant", "content": "hello hello"},
     {"role": "user", "content": "and once more, in French: été?"},
     {"role": "assistant", "content": "bonjour — été ☀"}],
    [{"role": "user", "content": "tokens like <|im_end|> inside text"},
     {"role": "assistant", "content": "stay special: <|im_start|> and   spaces  \n\n new lines"}],
    [{"role": "user", "content": "  leading and trailing spaces  "},
     {"role": "assistant", "content": "x"}],
]
