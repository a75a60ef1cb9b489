"""The tokenizer comparison table, the tokenizer statistics, and their plot.

The comparison table counts content pieces only (no BOS/EOS), on the training and the validation
text as written, so that the three kinds can be set side by side. The statistics: vocabulary size,
training tokens, characters per token, the share of validation tokens that are unknown, how many
characters a context of T tokens holds, and the BPE history (training tokens after k merges) as a
table and, on request, a plot.

``compare_tokenizers`` cuts a continuous text by position (``cut = floor(len(text) * train_fraction)``
characters, computed exactly as the corpus splitter does; train = ``text[:cut]``, validation = the
rest), fits char, word and BPE on the training part only, and counts content pieces (no BOS/EOS)
on both parts as written.

Unknown input in the validation part, exactly:
- char and bpe: the validation text is cut at every character absent from the training
  alphabet; each such character counts as one token, and as one unknown token; every segment
  between them is encoded on its own (so no word spans an unknown character).
- word: the word tokenizer is built with ``<unk>``; every validation piece not in its
  vocabulary is one token, and one unknown token.
``unknown_rate`` = unknown tokens / validation tokens (0.0 for an empty validation part).
``vocab_size`` counts distinct content pieces (no specials, no ``<unk>``).
``context_characters`` = context x training characters / training tokens.
Cost: one BPE training plus three encodings of the text, all linear-time kernels.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np

from engine.checks import check_count, check_fraction
from engine.errors import EngineError
from engine.tokenizers.bpe import BpeTrainer
from engine.tokenizers.char import CharTokenizer
from engine.tokenizers.word import WordTokenizer

__all__ = ["compare_tokenizers", "format_comparison", "plot_history", "vocabulary_after_merges"]

UNKNOWN_TOKEN = "<unk>"


def _segments_without(text: str, alphabet: str) -> tuple[list[str], int]:
    """``text`` cut at characters outside ``alphabet``: (segments, number of such characters)."""
    known = set(alphabet)
    segments: list[str] = []
    unknown = 0
    start = 0
    for i, ch in enumerate(text):
        if ch not in known:
            segments.append(text[start:i])
            unknown += 1
            start = i + 1
    segments.append(text[start:])
    return segments, unknown


def _count_with_unknowns(tokenizer, text: str, alphabet: str) -> tuple[int, int]:
    """(tokens, unknown tokens) of ``text`` under the char/bpe rule in the module docstring."""
    segments, unknown = _segments_without(text, alphabet)
    values, offsets = tokenizer.encode_documents(segments)
    content = int(values.shape[0]) - (1 if tokenizer.bos_id is None else 2) * len(segments)  # less the wrappers
    return content + unknown, unknown


def _row(scheme, vocab_size, train_chars, train_tokens, validation_tokens, unknown, context):
    return {
        "scheme": scheme,
        "vocab_size": int(vocab_size),
        "train_tokens": int(train_tokens),
        "validation_tokens": int(validation_tokens),
        "chars_per_token": train_chars / train_tokens,
        "unknown_rate": unknown / validation_tokens if validation_tokens else 0.0,
        "context_characters": context * train_chars / train_tokens,
    }


def compare_tokenizers(text: str, *, train_fraction: float = 0.9, merges: int = 200, context: int = 64) -> dict:
    """Fit char, word and BPE on the training part of ``text``; the table as a JSON-ready dict."""
    check_fraction(train_fraction, "train_fraction")
    merges = check_count(merges, "merges")
    context = check_count(context, "context", low=1)
    # Exact product, as CorpusPartitions.from_text cuts: 0.29 of 100 characters is 29, not 28.
    cut = math.floor(len(text) * Fraction(repr(float(train_fraction))))
    train, validation = text[:cut], text[cut:]
    n_train = len(train)

    char = CharTokenizer.fit(train)
    val_tokens, val_unknown = _count_with_unknowns(char, validation, char.alphabet)
    rows = [_row("char", len(char.alphabet), n_train, n_train, val_tokens, val_unknown, context)]

    word = WordTokenizer.fit(train, unknown=UNKNOWN_TOKEN)
    train_word_tokens = int(word.encode(train).shape[0])
    val_word_tokens = int(word.encode(validation).shape[0])
    rows.append(
        _row("word", len(word.pieces), n_train, train_word_tokens, val_word_tokens, word.last_unknown_count, context)
    )

    bpe = BpeTrainer(merges).train(train)
    val_tokens, val_unknown = _count_with_unknowns(bpe, validation, bpe.alphabet)
    rows.append(_row("bpe", len(bpe.pieces), n_train, bpe.history[-1][1], val_tokens, val_unknown, context))

    return {
        "train_characters": n_train,
        "validation_characters": len(validation),
        "schemes": rows,
        "bpe": {
            "merges": [[a, b] for a, b in bpe.merges],
            "history": [[k, t] for k, t in bpe.history],
        },
    }


def vocabulary_after_merges(alphabet_size: int, merges: list) -> list[int]:
    """Distinct content pieces after k = 0..N merges (a merge rebuilding a known piece adds none)."""
    seen: set[str] = set()
    sizes = [alphabet_size]
    for a, b in merges:
        seen.add(a + b)
        sizes.append(alphabet_size + len(seen))
    return sizes


def format_comparison(report: dict) -> str:
    """The comparison as a fixed-width text table plus the BPE history at a few points."""
    header = (f"{'scheme':<6} {'vocab':>7} {'train tokens':>13} {'valid tokens':>13} {'chars/token':>11} "
              f"{'unknown':>8} {'context chars':>13}")
    lines = [
        f"train: {report['train_characters']} characters, validation: {report['validation_characters']} characters",
        header,
        "-" * len(header),
    ]
    for row in report["schemes"]:
        lines.append(
            f"{row['scheme']:<6} {row['vocab_size']:>7} {row['train_tokens']:>13} {row['validation_tokens']:>13} "
            f"{row['chars_per_token']:>11.3f} {row['unknown_rate']:>8.2%} {row['context_characters']:>13.1f}"
        )
    history = report["bpe"]["history"]
    if len(history) > 1:
        picks = sorted({0, len(history) // 4, len(history) // 2, 3 * len(history) // 4, len(history) - 1})
        lines.append("bpe history (merges -> training tokens): " + ", ".join(f"{history[i][0]}: {history[i][1]}" for i in picks))
    return "\n".join(lines)


def plot_history(report: dict, path: str | os.PathLike) -> None:
    """Training tokens vs vocabulary size (log x): the BPE curve, with char and word marked."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise EngineError("plotting needs matplotlib: install engine[plot] (pip install 'engine[plot]')") from None
    rows = {row["scheme"]: row for row in report["schemes"]}
    bpe = report["bpe"]
    sizes = vocabulary_after_merges(rows["char"]["vocab_size"], bpe["merges"])
    tokens = np.array([t for _, t in bpe["history"]])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(sizes[: len(tokens)], tokens, label="bpe (after k merges)")
    for scheme, marker in (("char", "o"), ("word", "s"), ("bpe", "^")):
        row = rows[scheme]
        ax.scatter([row["vocab_size"]], [row["train_tokens"]], marker=marker, zorder=3, label=scheme)
    ax.set_xscale("log")
    ax.set_xlabel("vocabulary size (content pieces)")
    ax.set_ylabel("training tokens")
    ax.set_title(f"Tokens vs vocabulary ({report['train_characters']} training characters)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)

