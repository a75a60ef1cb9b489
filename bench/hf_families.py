"""Tokenizer.json files with the components of each model family (Llama 3, Qwen2, StarCoder, DeepSeek,
DeepSeek Coder, Falcon, MPT, Command-R, Llama 2, Mistral, Phi-3, GPT-2), built through the
``tokenizers`` API and trained on Tiny Shakespeare (or given texts): what the benchmark of
tokenizer.json pipelines times and the tests compare with (tests/naive_hf.py re-exports them)."""

from __future__ import annotations

import json

from pathlib import Path

SHAKESPEARE = (Path(__file__).resolve().parent.parent / "data" / "tinyshakespeare.txt").read_text(encoding="utf-8")


LLAMA3_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")
DEEPSEEK_SPLITS = [r"[\r\n]", r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕ]+",
                   r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}+"]
# DeepSeek Coder's Split regexes: newlines, letters, punctuation (each with an optional leading space),
# CJK runs and single digits
DEEPSEEK_CODER_SPLITS = [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}"]
SPLIT_SEQUENCES = {"deepseek": DEEPSEEK_SPLITS, "deepseek-coder": DEEPSEEK_CODER_SPLITS}  # Split steps, then ByteLevel
BYTE_FALLBACKS = [f"<0x{b:02X}>" for b in range(256)]


def build_family(name: str, vocab_size: int = 500, texts: list[str] | None = None):
    """A trained ``tokenizers.Tokenizer`` with the components of family ``name`` (``-sp``: trained as
    SentencePiece trains, no token crossing a word's leading \u2581), on ``texts`` (default: the first
    4,000 lines of Tiny Shakespeare)."""
    sp_like = name.endswith("-sp")
    name = name.removesuffix("-sp")
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    byte_level = name not in ("llama2", "mistral", "phi3")
    if byte_level:
        tok = Tokenizer(models.BPE(ignore_merges=name == "llama3"))
        tok.decoder = decoders.ByteLevel()
        specials = {"llama3": ["<|begin_of_text|>", "<|end_of_text|>"], "qwen2": ["<|endoftext|>", "<|im_start|>",
                                                                                   "<|im_end|>"],
                    "falcon": [">>TITLE<<", "<|endoftext|>"]}.get(name, ["<|endoftext|>"])
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        byte_level_step = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        if name == "llama3":
            tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_REGEX), "isolated"),
                                                         byte_level_step])
            tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                               special_tokens=[("<|begin_of_text|>", 0)])
        elif name == "qwen2":
            tok.normalizer = normalizers.NFC()
            tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_REGEX), "isolated"),
                                                         byte_level_step])
            tok.post_processor = processors.ByteLevel(trim_offsets=False)
        elif name == "starcoder":
            tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                         pre_tokenizers.ByteLevel(add_prefix_space=False)])
        elif name in SPLIT_SEQUENCES:
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Split(Regex(r), "isolated") for r in SPLIT_SEQUENCES[name]] + [byte_level_step])
        elif name == "falcon":
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Punctuation("contiguous"), pre_tokenizers.ByteLevel(add_prefix_space=False),
                pre_tokenizers.Digits(individual_digits=False),
                pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), "isolated")])
        elif name in ("mpt", "command-r"):
            tok.normalizer = normalizers.NFC()
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=name == "command-r")
        else:  # gpt2
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"],
                                      show_progress=False)
        if name == "mistral":  # the newer conversion: Metaspace, prepended to the first piece only
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
            tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                             decoders.Strip(" ", 1, 0)])
        else:
            tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
            tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                             decoders.Strip(" ", 1, 0)])
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    final_pre_tokenizer = tok.pre_tokenizer
    if sp_like:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.train_from_iterator(texts if texts is not None else SHAKESPEARE.splitlines()[:4000], trainer)
    if sp_like:
        tok.pre_tokenizer = final_pre_tokenizer
    if not byte_level:  # the <0xXX> tokens are model tokens (ids 3..258), as in Llama 2's file
        data = json.loads(tok.to_str())
        vocab = data["model"]["vocab"]
        moved = {t: (i if i < 3 else i + 256) for t, i in vocab.items()}
        moved.update({code: 3 + b for b, code in enumerate(BYTE_FALLBACKS)})
        data["model"]["vocab"] = moved
        tok = Tokenizer.from_str(json.dumps(data))
    if name == "phi3":
        tok.add_tokens([AddedToken("<|user|>", normalized=False, special=False),
                        AddedToken("<|assistant|>", normalized=False, special=False, rstrip=True)])
        tok.add_special_tokens([AddedToken("<|end|>", normalized=False, special=True)])
    if name == "gpt2":  # a non-special added token makes it a pipeline file
        tok.add_tokens([AddedToken(" thou", normalized=True, special=False)])
    return tok


FAMILIES = ["gpt2", "llama3", "qwen2", "starcoder", "deepseek", "deepseek-coder", "falcon", "mpt", "command-r", "llama2",
            "llama2-sp", "mistral", "phi3"]
