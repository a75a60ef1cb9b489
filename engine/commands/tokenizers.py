"""``engine tokenizers``: compare the classic tokenizers on a text, and train one on a corpus."""

from __future__ import annotations

import json
from pathlib import Path

import click

from engine.checks import check_out_file
from engine.commands._options import column_options, json_option, split_options
from engine.corpus.fit_sample import FitSample, describe_fit_sample
from engine.corpus.readers import INVALID_UTF8_POLICIES
from engine.errors import ConfigurationError, CorpusError
from engine.tokenizers.base import TIE_BREAKS, FitOptions, is_engine_tokenizer_file
from engine.tokenizers.bpe import LEVELS
from engine.tokenizers.pretokenize import PATTERN_NAMES, canonical_pattern
from engine.tokenizers.type_table import cap_types, count_types, describe_max_types, train_on_table


@click.group(name="tokenizers")
def command() -> None:
    """Fit, compare and save the character, word and BPE tokenizers.

    \b
    Example:
      engine tokenizers compare data/tinyshakespeare.txt --merges 200
      engine tokenizers train data/tinyshakespeare.txt --kind bpe --merges 200 --out bpe.json
    """


@command.command(name="compare")
@click.argument("text_file", metavar="TEXT", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--train-fraction", default=0.9, show_default=True, type=float,
              help="Share of the characters (from the start) that trains; the rest validates.")
@click.option("--merges", default=200, show_default=True, type=int, help="BPE merges to train.")
@click.option("--context", default=64, show_default=True, type=int,
              help="Context length T in tokens, reported as characters per context.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write a PNG of training tokens vs vocabulary size (needs engine[plot]).")
@json_option
@click.option("--on-invalid-utf8", type=click.Choice(list(INVALID_UTF8_POLICIES)), default="error", show_default=True,
              help="What to do with bytes that are not UTF-8 (replace: U+FFFD; skip: drop the invalid bytes).")
def compare(text_file: Path, train_fraction: float, merges: int, context: int, plot_path: Path | None, as_json: bool,
            on_invalid_utf8: str) -> None:
    """Fit char, word and BPE on the first part of TEXT; compare them on both parts.

    Counts content pieces only (no BOS/EOS). Validation characters missing from the training
    alphabet count as one unknown token each (char, bpe); the word tokenizer maps unseen
    pieces to <unk> and counts those.

    \b
    Example:
      engine tokenizers compare data/tinyshakespeare.txt
      engine tokenizers compare play.txt --merges 500 --context 256 --plot bpe.png
      engine tokenizers compare play.txt --json > table.json
    """
    from engine.corpus import read_text_file
    from engine.tokenizers.stats import compare_tokenizers, format_comparison, plot_history

    report = compare_tokenizers(read_text_file(text_file, on_invalid_utf8=on_invalid_utf8),
                                train_fraction=train_fraction, merges=merges, context=context)
    if plot_path is not None:
        plot_history(report, plot_path)
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
    else:
        click.echo(format_comparison(report))
        if plot_path is not None:
            click.echo(f"plot written to {plot_path}")


def _training_texts(corpus_path: Path, splits: str | None, hash_split: dict | None, train_fraction: float,
                    text_column: str = "text", id_column: str | None = None, fit_sample: int | None = None
                    ) -> tuple[list[str], dict | None]:
    """The texts of the TRAIN partition only (with ``fit_sample``: its fit sample, the rule of
    ``engine.corpus.fit_sample``), and the sample's summary (None without one)."""
    from engine.corpus import (
        Corpus, CorpusPartitions, Partition, SplitManifest, check_columns_apply, is_continuous_text, read_text_file,
    )

    check_columns_apply(corpus_path, text_column, id_column)
    if is_continuous_text(corpus_path):
        if splits is not None or hash_split is not None:
            raise ConfigurationError(
                f"{corpus_path}: a continuous .txt text is split by position (--train-fraction), not by --splits/--hash-split"
            )
        partitions = CorpusPartitions.from_text(read_text_file(corpus_path), train_fraction, name=corpus_path.stem)
    else:
        if splits is None and hash_split is None:
            raise ConfigurationError(
                f"{corpus_path}: a corpus of documents needs --splits MANIFEST.json or --hash-split R,R,R "
                "so only training documents fit"
            )
        manifest = SplitManifest.from_json(splits) if splits is not None else SplitManifest.by_hash(hash_split)
        partitions = manifest.partition(Corpus.from_path(corpus_path, text_column=text_column, id_column=id_column))
    documents = partitions.documents(Partition.TRAIN)
    if not documents:
        raise CorpusError(f"{corpus_path}: the train partition is empty; nothing to fit the tokenizer on")
    if fit_sample is None:
        return [doc.text for doc in documents], None
    sample = FitSample(fit_sample)
    texts = [text for text in (sample.take(doc.id, doc.text) for doc in documents) if text is not None]
    return texts, sample.summary()


@command.command(name="train")
@click.argument("corpus", type=click.Path(exists=True, path_type=Path))
@click.option("--kind", type=click.Choice(["char", "word", "bpe"]), required=True, help="Tokenizer kind.")
@click.option("--merges", type=int, default=None, help="BPE merges (default 200 unless --vocab-size).")
@click.option("--level", type=click.Choice(LEVELS), default="char", show_default=True, help="BPE level.")
@click.option("--vocab-size", type=int, default=None, help="BPE: stop at this many ids (specials included).")
@click.option("--pattern", default="gpt2", show_default=True, metavar="NAME|REGEX",
              help=f"Byte-level BPE pre-tokenizer: {', '.join(PATTERN_NAMES)} or any regex, e.g. "
                   "--pattern '[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                   "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+'.")
@click.option("--tie-break", type=click.Choice(list(TIE_BREAKS)), default="first", show_default=True,
              help="BPE tie rule: the pair that occurs first in the training text, or Hugging Face's order.")
@split_options
@column_options
@click.option("--unknown", default=None, help="Word tokenizer: map unseen pieces to this token (e.g. '<unk>').")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Tokenizer file to write.")
@click.option("--fit-sample", "fit_sample", default=None, metavar="BYTES",
              help="Fit on the first BYTES UTF-8 bytes of the train partition only (its documents in corpus order, "
                   "the one that crosses BYTES cut at a character); a number of bytes or with a unit: 64MB, 1GiB.")
@click.option("--max-types", "max_types", default=None, type=int, metavar="N",
              help="Fit on the N most frequent types only (ties by first appearance; --kind word, --kind bpe "
                   "--level byte).")
@click.option("--force", is_flag=True, help="Replace --out even if it is not an engine tokenizer file.")
def train(corpus: Path, kind: str, merges: int | None, level: str, vocab_size: int | None, pattern: str,
          tie_break: str, splits: str | None, hash_split: dict | None, train_fraction: float, text_column: str,
          id_column: str | None, unknown: str | None, fit_sample: str | None, max_types: int | None, out_path: Path,
          force: bool) -> None:
    """Fit a tokenizer on the TRAIN partition of CORPUS and save it.

    \b
    Example:
      engine tokenizers train data/tinyshakespeare.txt --kind bpe --merges 200 --out bpe.json
      engine tokenizers train corpus.jsonl --splits splits.json --kind word --unknown '<unk>' --out word.json
      engine tokenizers train corpus.jsonl --hash-split 0.98,0.01,0.01 --kind bpe --level byte --vocab-size 4096 --out b.json
      engine tokenizers train big.jsonl --hash-split 0.98,0.01,0.01 --kind bpe --fit-sample 1GB --out b.json
    """
    from engine.tokenizers.bpe import BpeTrainer
    from engine.tokenizers.char import CharTokenizer
    from engine.tokenizers.word import WordTokenizer

    pattern = canonical_pattern(pattern, "--pattern")
    bounds = FitOptions(fit_sample=fit_sample, max_types=max_types)  # checked before anything is read
    if max_types is not None and not (kind == "word" or (kind == "bpe" and level == "byte")):
        raise ConfigurationError(f"--max-types applies to --kind word and --kind bpe --level byte, not --kind {kind}"
                                 + (" --level char" if kind == "bpe" else ""))

    if kind != "bpe" and (merges is not None or vocab_size is not None or level != "char"):
        raise ConfigurationError(f"--merges/--vocab-size/--level apply to --kind bpe, not --kind {kind}")
    if kind != "word" and unknown is not None:
        raise ConfigurationError(f"--unknown applies to --kind word, not --kind {kind}")
    check_out_file(out_path, force=force, is_ours=is_engine_tokenizer_file, what="an engine tokenizer file")
    texts, sample = _training_texts(corpus, splits, hash_split, train_fraction, text_column, id_column,
                                    bounds.fit_sample)
    if merges is None and vocab_size is None and kind == "bpe":
        merges = 200
    capped = None
    if kind == "char":
        tokenizer = CharTokenizer.fit(texts)
    elif bounds.max_types is not None:  # the type cap rule: count, keep the most frequent, fit on those
        from engine.tokenizers.streaming import training_batches

        trainer = (WordTokenizer.trainer(FitOptions(unknown=unknown)) if kind == "word" else
                   BpeTrainer(merges, level=level, vocab_size=vocab_size, pattern=pattern, tie_break=tie_break))
        table = count_types(trainer, training_batches(trainer, [texts]), 1)
        if not len(table):
            raise CorpusError(f"{corpus}: the train partition holds no text; nothing to fit the tokenizer on")
        table, capped = cap_types(table, bounds.max_types)
        tokenizer = train_on_table(trainer, table)
    elif kind == "word":
        tokenizer = WordTokenizer.fit(texts, unknown=unknown)
    else:
        tokenizer = BpeTrainer(merges, level=level, vocab_size=vocab_size, pattern=pattern, tie_break=tie_break).train(texts)
    tokenizer.save(out_path)
    if sample is not None:
        click.echo(describe_fit_sample(sample))
    if capped is not None:
        click.echo(describe_max_types(capped))
    click.echo(f"{tokenizer.kind} tokenizer: {tokenizer.vocab_size:,} ids, hash {tokenizer.hash[:12]}, "
               f"written to {out_path}")


from engine.commands._tokenizers_import import import_command  # noqa: E402  (defined beside this group)

command.add_command(import_command)
