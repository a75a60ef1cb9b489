"""Chat data to packed rows with loss weights, beside TRL's own data preparation.

Workload: the bundled data/chat.jsonl conversations repeated (2,400 in quick mode, 12,000 otherwise),
TRL's ``qwen2_5_training.jinja`` (``{% generation %}`` markers, so both sides follow the markers)
and one byte-level BPE ``tokenizer.json`` built with the ``tokenizers`` library (trained on the
bundled corpus, ChatML's special tokens added), read by engine and by
``transformers.PreTrainedTokenizerFast``; rows of 1,024 positions.

- engine: ``ChatEncoder.encode_many`` on chunks of 2,048 conversations (render, tokenize with specials
  as special, role flags) and
  ``pack_documents(..., "bfd", roles=...)``: packed rows with inputs, targets and loss weights.
- TRL: what ``SFTTrainer._prepare_dataset`` does with ``assistant_only_loss=True`` and
  ``packing=True``: ``Dataset.from_list`` -> ``map`` of ``trl.data_utils._tokenize``
  (``apply_chat_template(..., return_dict=True, return_assistant_tokens_mask=True)``) -> ``map``
  building ``labels`` (-100 off the assistant mask) -> ``select_columns`` -> ``pack_dataset(..., "bfd")``.

Both on one thread (``TOKENIZERS_PARALLELISM=false``). Before timing, every conversation's ids and
flags are checked equal (engine's tokens vs TRL's ``input_ids``, engine's role flags vs TRL's
``labels != -100``). Target: >= 5x.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from timing import DATA_DIR, best_of_interleaved, hf_parallelism, row

ROW_LENGTH = 1024
CHUNK = 2048  # conversations per encode call, as prepare's encode chunks (PrepareLimits.encode_chunk_documents)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _tokenizer_json(folder: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = [json.loads(line)["text"] for line in (DATA_DIR / "corpus.jsonl").read_text().splitlines()]
    texts += [m["content"] for line in (DATA_DIR / "chat.jsonl").read_text().splitlines()
              for m in json.loads(line)["messages"]]
    tok.train_from_iterator(texts, trainer)
    path = folder / "tokenizer.json"
    tok.save(str(path))
    return path


def workload(quick: bool):
    import trl

    conversations = [json.loads(line)["messages"] for line in (DATA_DIR / "chat.jsonl").read_text().splitlines()]
    conversations = conversations * (10 if quick else 50)
    template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5_training.jinja").read_text(encoding="utf-8")
    return conversations, template


def engine_side(tokenizer_json: Path, template: str):
    from engine.chat.encode import ChatEncoder
    from engine.chat.template import ChatTemplate
    from engine.packing import pack_documents
    from engine.tokenizers.loading import load_tokenizer

    encoder = ChatEncoder(load_tokenizer(tokenizer_json), ChatTemplate(template, special_tokens={
        "eos_token": "<|im_end|>"}))

    def run(conversations):
        parts = [encoder.encode_many(conversations[i:i + CHUNK], ["bench"] * len(conversations[i:i + CHUNK]))
                 for i in range(0, len(conversations), CHUNK)]  # prepare's encode chunks
        values = np.concatenate([p[0] for p in parts])
        roles = np.concatenate([p[2] for p in parts])
        lengths = np.concatenate([np.diff(p[1]) for p in parts])
        offsets = np.zeros(lengths.shape[0] + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = [str(i) for i in range(len(conversations))]
        return (values, offsets, roles), pack_documents((values, offsets, ids), ROW_LENGTH, "bfd", roles=roles)

    return run


def trl_side(tokenizer_json: Path, template: str):
    import transformers
    from datasets import Dataset
    from datasets.utils.logging import disable_progress_bar
    from trl.data_utils import _tokenize, pack_dataset

    disable_progress_bar()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json), eos_token="<|im_end|>")
    tokenizer.chat_template = template

    def tokenize(example):
        processed = _tokenize(tokenizer, example["messages"], chat_template=template, tools=None,
                              return_assistant_tokens_mask=True)
        return {k: processed[k] for k in ("input_ids", "assistant_masks")}

    def build_labels(example):
        return {"labels": [t if m else -100 for t, m in zip(example["input_ids"], example["assistant_masks"])]}

    def run(conversations, packed=True):
        dataset = Dataset.from_list([{"messages": c} for c in conversations])
        dataset = dataset.map(tokenize, remove_columns=["messages"])
        dataset = dataset.map(build_labels, remove_columns=["assistant_masks"])
        dataset = dataset.select_columns(["input_ids", "labels"])
        return pack_dataset(dataset, ROW_LENGTH, "bfd") if packed else dataset

    return run


def compare(quick: bool) -> dict | None:
    try:
        import datasets  # noqa: F401
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
        import trl  # noqa: F401
    except ImportError:
        return None
    conversations, template = workload(quick)
    with tempfile.TemporaryDirectory(prefix="engine-chat-bench-") as folder, hf_parallelism(False):
        tokenizer_json = _tokenizer_json(Path(folder))
        engine_run, trl_run = engine_side(tokenizer_json, template), trl_side(tokenizer_json, template)
        (values, offsets, roles), packed = engine_run(conversations[:300])
        reference = trl_run(conversations[:300], packed=False)
        for i, example in enumerate(reference):
            ids = values[offsets[i]:offsets[i + 1]].tolist()
            flags = roles[offsets[i]:offsets[i + 1]].tolist()
            if ids != example["input_ids"] or flags != [int(label != -100) for label in example["labels"]]:
                raise RuntimeError(f"conversation {i}: engine and TRL give other ids or flags")
        engine_s, trl_s = best_of_interleaved(lambda: engine_run(conversations), lambda: trl_run(conversations),
                                              2 if quick else 3)
        _, packed = engine_run(conversations)
        tokens = int(packed.real_positions) if hasattr(packed, "real_positions") else 0
    return {"engine_s": engine_s, "trl_s": trl_s, "conversations": len(conversations), "tokens": tokens}


def rows(quick: bool) -> list[dict]:
    result = compare(quick)
    if result is None:
        return []
    return [row(f"chat data to packed rows with loss weights, {result['conversations']:,} conversations "
                f"(qwen2_5_training template, rows of {ROW_LENGTH}; same ids and flags as peer)",
                result["engine_s"], "TRL SFT preparation (datasets map: apply_chat_template with assistant masks, "
                "labels, pack_dataset bfd), one thread", result["trl_s"], at_least=5)]
