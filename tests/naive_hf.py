"""Plain-loop twins for the tokenizer.json pipeline, and the test tokenizers of each model family.

- ``naive_char_bpe``: Hugging Face's ``BPE::merge_word`` and ``Word::merge_all`` for one piece
  (characters, byte fallback, unknowns, ignore_merges, then the lowest-ranked pair, leftmost).
- ``naive_fold``: ``NormalizedString::split``'s behaviours over a piece's spans.
- ``naive_cut_pieces``: ``hf_bpe.cut_pieces``, from the vocabulary's strings: a cut between two
  characters that both are tokens when no token holds them side by side.
- ``naive_metaspace``: a Metaspace step (``hf_split.spaces_replaced``), on the string: spaces replaced, the
  replacement prepended when asked and the text does not then start with it.
- ``regex_double``: a stand-in for ``engine.tokenizers.regex`` built on the ``regex`` module (used
  only where that module is absent, so the pipeline's Split logic is tested either way).
- ``FAMILIES``: tokenizer.json files with the components of each model family, built through the
  ``tokenizers`` API and trained on Tiny Shakespeare.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import regex


from bench.hf_families import (BYTE_FALLBACKS, DEEPSEEK_SPLITS, FAMILIES, LLAMA3_REGEX, QWEN2_REGEX,  # noqa: F401
                                SHAKESPEARE, build_family)


def naive_metaspace(text: str, replacement: str, prepend: bool) -> str:
    """A Metaspace step that does not split, on the string (Hugging Face's ``Metaspace``)."""
    text = text.replace(" ", replacement)
    if prepend and not text.startswith(replacement):
        text = replacement + text
    return text


def naive_cut_pieces(text: str, ends: list[int], vocab: dict[str, int]) -> list[int]:
    """Piece ends of ``text`` (pieces ending at ``ends``) cut where no merge can cross."""
    pairs = {token[i:i + 2] for token in vocab for i in range(len(token) - 1)}
    out, start = [], 0
    for end in ends:
        for i in range(start + 1, end):
            a, b = text[i - 1], text[i]
            if a in vocab and b in vocab and a + b not in pairs:
                out.append(i)
        out.append(end)
        start = end
    return out


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




def naive_byte_chars_utf8(data: bytes, ends: list[int]) -> tuple[bytes, list[int], list[int]]:
    """``hf_split.byte_chars_utf8``: the UTF-8 of each byte's GPT-2 character, the piece ends in it, and
    the offset of each character's start (and the end) in that text."""
    from engine.tokenizers.byte_bpe import bytes_to_unicode
    table = bytes_to_unicode()
    text = "".join(table[b] for b in data)
    starts = [len(text[:i].encode("utf-8")) for i in range(len(data) + 1)]
    return text.encode("utf-8"), [starts[e] for e in ends], starts
