"""``engine tokenizers import``: turn a tiktoken rank file, a tokenizer.json, a tekken.json or a SentencePiece
.model into an engine tokenizer file."""

from __future__ import annotations

from pathlib import Path

import click

from engine.checks import check_out_file
from engine.errors import TokenizerError
from engine.tokenizers.base import is_engine_tokenizer_file
from engine.tokenizers.pretokenize import PATTERN_NAMES, canonical_pattern

__all__ = ["import_command", "detect_format"]


def detect_format(path: Path) -> str:
    """``tokenizer.json`` for a folder, a .json name or content starting with ``{``, ``sentencepiece``
    for a protobuf ModelProto, else ``tiktoken``."""
    from engine.tokenizers.spm_model import looks_like_model

    if path.is_dir() or path.suffix.lower() == ".json":
        return "tokenizer.json"
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read: {exc.strerror}") from None
    if looks_like_model(head):
        return "sentencepiece"
    return "tokenizer.json" if head.lstrip().startswith(b"{") else "tiktoken"


def _parse_specials(values: tuple[str, ...]) -> dict[str, int] | None:
    specials = {}
    for value in values:
        name, sep, number = value.rpartition("=")
        if not sep or not name or not (number.isascii() and number.isdigit() and len(number) <= 10):  # not "²"
            raise TokenizerError(f"--special {value!r}: expected TOKEN=ID with a non-negative integer ID")
        specials[name] = int(number)
    return specials or None


def _import(file: Path, fmt: str | None, pattern: str, bos: str | None, eos: str | None,
            special: tuple[str, ...], out: Path, force: bool) -> None:
    """Import FILE (tiktoken rank file, tokenizer.json, a model folder holding one, Mistral's
    tekken.json, or a SentencePiece BPE .model) as an engine tokenizer.

    The tokenizer keeps the ids of FILE; --bos and --eos name the special tokens that wrap each
    document: give both (they may be the same token) or neither (then the file's: post_processor,
    tokenizer_config.json; a tokenizer.json that adds no BOS, as Qwen's, wraps as [content..., EOS]
    and takes --eos alone).

    \b
    Example:
      engine tokenizers import cl100k_base.tiktoken --pattern cl100k \\
          --special '<|endoftext|>=100257' --out cl100k.tokenizer.json
      engine tokenizers import hf/tokenizer.json --bos '<bos>' --eos '<eos>' --out bpe.json
      engine tokenizers import llama/tokenizer.model --out llama.tokenizer.json
      engine tokenizers import mistral-nemo/tekken.json --out nemo.tokenizer.json
      engine tokenizers import models/Llama-2-7b/ --out llama2.tokenizer.json
    """
    from engine.tokenizers.hf_pipeline import load_hf_file
    from engine.tokenizers.interop import load_tiktoken

    if not file.exists():
        raise TokenizerError(f"{file}: file not found")
    check_out_file(out, force=force, is_ours=is_engine_tokenizer_file, what="an engine tokenizer file")
    fmt = fmt or detect_format(file)
    if fmt == "sentencepiece":
        from engine.tokenizers.sentencepiece import load_sentencepiece

        if special:
            raise TokenizerError("--special applies to tiktoken files only (a SentencePiece model lists its pieces)")
        tokenizer = load_sentencepiece(file, bos="" if bos is None else bos, eos="" if eos is None else eos)
    elif fmt == "tekken":
        from engine.tokenizers.interop import load_tekken

        if special:
            raise TokenizerError("--special applies to tiktoken files only (a tekken file lists its special tokens)")
        tokenizer = load_tekken(file, bos=bos, eos=eos)
    elif fmt == "tiktoken":
        tokenizer = load_tiktoken(file, pattern=canonical_pattern(pattern, "--pattern"),
                                  special_tokens=_parse_specials(special), bos=bos, eos=eos)
    else:
        if special:
            raise TokenizerError("--special applies to tiktoken files only (tokenizer.json lists its added tokens)")
        tokenizer = load_hf_file(file, bos=bos, eos=eos)
    tokenizer.save(out)
    click.echo(
        f"imported {fmt} {file} -> {out}: {tokenizer.kind}, vocab_size {tokenizer.vocab_size}, "
        f"pattern {getattr(tokenizer, 'pattern', 'of the file')}, "
        f"bos {'none' if tokenizer.bos_id is None else f'{tokenizer.bos!r}={tokenizer.bos_id}'}, "
        f"eos {tokenizer.eos!r}={tokenizer.eos_id}, hash {tokenizer.hash[:12]}")


import_command = click.command("import")(
    click.argument("file", type=click.Path(path_type=Path))(
        click.option("--format", "fmt", default=None,
                     type=click.Choice(["tiktoken", "tokenizer.json", "tekken", "sentencepiece"]),
                     help="Input format (default: detected from the extension and content; a .json file that is "
                          "Mistral's tekken.json is read as one).")(
            click.option("--pattern", default="gpt2", show_default=True, metavar="NAME|REGEX",
                         help=f"Pre-tokenizer of a tiktoken file (tokenizer.json names its own): {', '.join(PATTERN_NAMES)} "
                              "or any regex, e.g. --pattern '\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+|\\s+'.")(
                click.option("--bos", default=None, help="Special token written before each document (with --eos).")(
                    click.option("--eos", default=None, help="Special token written after each document (with "
                                 "--bos; alone for a tokenizer.json without BOS).")(
                        click.option("--special", multiple=True, metavar="TOKEN=ID",
                                     help="A special token of a tiktoken file (repeatable).")(
                            click.option("--out", type=click.Path(path_type=Path), required=True,
                                         help="Engine tokenizer file to write.")(
                                click.option("--force", is_flag=True,
                                             help="Replace --out even if it is not an engine tokenizer file.")(
                                    _import)))))))))
