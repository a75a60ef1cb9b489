"""Plain-loop twins for the tokenizer.json pipeline, and the test tokenizers of each model family.

- ``naive_char_bpe``: Hugging Face's ``BPE::merge_word`` and ``Word::merge_all`` for one piece
  (characters, byte fallback, unknowns, ignore_merges, then the lowest-ranked pair, leftmost).
- ``naive_fold``: ``NormalizedString::split``'s behaviours over a piece's spans.
- ``regex_double``: a stand-in for ``engine.tokenizers.regex`` built on the ``regex`` module (used
  only where that module is absent, so the pipeline's Split logic is tested either way).
- ``FAMILIES``: tokenizer.json files with the components of each model family, built through the
  ``tokenizers`` API and trained on Tiny Shakespeare.
"""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import regex

from pathlib import Path

SHAKESPEARE = (Path(__file__).resolve().parent.parent / "data" / "tinyshakespeare.txt").read_text(encoding="utf-8")


def naive_char_bpe(piece: str, vocab: dict[str, int], ranks: dict[tuple[int, int], tuple[int, int]], *,
                   byte_fallback=False, unk=None, fuse_unk=False, ignore_merges=False) -> list[int]:
    if ignore_merges and piece in vocab:
        return [vocab[piece]]
    word: list[int] = []
    pending = None
    for c in piece:
        if c in vocab:
            if pending is not None:
                word.append(pending)
                pending = None
            word.append(vocab[c])
            continue
        if byte_fallback:
            codes = [f"<0x{b:02X}>" for b in c.encode("utf-8")]
            if all(code in vocab for code in codes):
                word.extend(vocab[code] for code in codes)
                continue
        if unk is not None:
            if pending is not None and not fuse_unk:
                word.append(pending)
            pending = vocab[unk]
    if pending is not None:
        word.append(pending)
    while len(word) > 1:
        best = None
        for i in range(len(word) - 1):
            r = ranks.get((word[i], word[i + 1]))
            if r is not None and (best is None or r[0] < best[0]):
                best = (r[0], i, r[1])
        if best is None:
            break
        _, i, made = best
        word[i:i + 2] = [made]
    return word


def naive_fold(spans: list[tuple[int, int, bool]], behavior: str, invert: bool) -> list[tuple[int, int]]:
    """Hugging Face's fold of ``(start, end, is_match)`` spans; empty results dropped."""
    spans = [(s, e, m != invert) for s, e, m in spans]
    acc: list[list[int]] = []
    if behavior == "Isolated":
        acc = [[s, e] for s, e, _ in spans]
    elif behavior == "Removed":
        acc = [[s, e] for s, e, m in spans if not m]
    elif behavior == "MergedWithPrevious":
        previous = False
        for s, e, m in spans:
            if m and not previous and acc:
                acc[-1][1] = e
            else:
                acc.append([s, e])
            previous = m
    elif behavior == "MergedWithNext":
        previous = False
        for s, e, m in reversed(spans):
            if m and not previous and acc:
                acc[-1][0] = s
            else:
                acc.append([s, e])
            previous = m
        acc.reverse()
    else:  # Contiguous
        previous = False
        for s, e, m in spans:
            if m == previous and acc:
                acc[-1][1] = e
            else:
                acc.append([s, e])
            previous = m
    return [(s, e) for s, e in acc if e > s]


class _DoubleRegex:
    def __init__(self, pattern: str):
        self.compiled = regex.compile(pattern)

    def find_spans(self, data: bytes) -> np.ndarray:
        text = data.decode("utf-8")
        at = np.zeros(len(text) + 1, dtype=np.int64)
        at[1:] = np.cumsum([len(c.encode("utf-8")) for c in text])
        spans = [(at[m.start()], at[m.end()]) for m in self.compiled.finditer(text)]
        return np.array(spans, dtype=np.int64).reshape(-1, 2)


def install_regex_double() -> bool:
    """Make ``engine.tokenizers.regex`` importable; True when the stand-in had to be installed."""
    try:
        import engine.tokenizers.regex  # noqa: F401
        return False
    except ImportError:
        module = types.ModuleType("engine.tokenizers.regex")
        module.compile_regex = _DoubleRegex
        sys.modules["engine.tokenizers.regex"] = module
        return True


LLAMA3_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_REGEX = LLAMA3_REGEX.replace(r"\p{N}{1,3}", r"\p{N}")
DEEPSEEK_SPLITS = [r"[\r\n]", r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕ]+",
                   r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}+"]
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
        elif name == "deepseek":
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Split(Regex(r), "isolated") for r in DEEPSEEK_SPLITS] + [byte_level_step])
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


FAMILIES = ["gpt2", "llama3", "qwen2", "starcoder", "deepseek", "falcon", "mpt", "command-r", "llama2", "llama2-sp",
            "mistral", "phi3"]
