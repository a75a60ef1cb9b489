"""``engine tokenizers import``: turn a tiktoken rank file or a tokenizer.json into an engine tokenizer file."""

from __future__ import annotations

from pathlib import Path

import click

from engine.errors import TokenizerError
from engine.tokenizers.pretokenize import PATTERNS, canonical_pattern

__all__ = ["import_command", "detect_format"]


def detect_format(path: Path) -> str:
    """``tokenizer.json`` for a folder, a .json name or content starting with ``{``, else ``tiktoken``."""
    if path.is_dir() or path.suffix.lower() == ".json":
        return "tokenizer.json"
    try:
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read: {exc.strerror}") from None
    return "tokenizer.json" if head.startswith(b"{") else "tiktoken"


def _parse_specials(values: tuple[str, ...]) -> dict[str, int] | None:
    specials = {}
    for value in values:
        name, sep, number = value.rpartition("=")
        if not sep or not name or not number.isdigit():
            raise TokenizerError(f"--special {value!r}: expected TOKEN=ID with a non-negative integer ID")
        specials[name] = int(number)
    return specials or None


def _import(file: Path, fmt: str | None, pattern: str, bos: str | None, eos: str | None,
            special: tuple[str, ...], out: Path) -> None:
    """Import FILE (tiktoken rank file, tokenizer.json or a model folder holding one) as an engine tokenizer.

    The tokenizer keeps the ids of FILE; --bos and --eos name the special tokens that wrap each
    document: give both (they may be the same token) or neither (then the file's: post_processor, tokenizer_config.json).

    \b
    Example:
      engine tokenizers import cl100k_base.tiktoken --pattern cl100k \\
          --special '<|endoftext|>=100257' --out cl100k.tokenizer.json
      engine tokenizers import hf/tokenizer.json --bos '<bos>' --eos '<eos>' --out bpe.json
      engine tokenizers import models/Llama-2-7b/ --out llama2.tokenizer.json
    """
    from engine.tokenizers.hf_pipeline import load_hf_file
    from engine.tokenizers.interop import load_tiktoken

    if not file.exists():
        raise TokenizerError(f"{file}: file not found")
    fmt = fmt or detect_format(file)
    if fmt == "tiktoken":
        tokenizer = load_tiktoken(file, pattern=canonical_pattern(pattern, "--pattern"),
                                  special_tokens=_parse_specials(special), bos=bos, eos=eos)
    else:
        if special:
            raise TokenizerError("--special applies to tiktoken files only (tokenizer.json lists its added tokens)")
        tokenizer = load_hf_file(file, bos=bos, eos=eos)
    tokenizer.save(out)
    click.echo(
        f"imported {fmt} {file} -> {out}: {tokenizer.kind}, vocab_size {tokenizer.vocab_size}, "
        f"pattern {getattr(tokenizer, 'pattern', 'of the file')}, bos {tokenizer.bos!r}={tokenizer.bos_id}, "
        f"eos {tokenizer.eos!r}={tokenizer.eos_id}, hash {tokenizer.hash[:12]}")


import_command = click.command("import")(
    click.argument("file", type=click.Path(path_type=Path))(
        click.option("--format", "fmt", type=click.Choice(["tiktoken", "tokenizer.json"]), default=None,
                     help="Input format (default: detected from the extension and content).")(
            click.option("--pattern", default="gpt2", show_default=True, metavar="NAME|REGEX",
                         help=f"Pre-tokenizer of a tiktoken file (tokenizer.json names its own): {', '.join(PATTERNS)} "
                              "or any regex, e.g. --pattern '\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+|\\s+'.")(
                click.option("--bos", default=None, help="Special token written before each document (with --eos).")(
                    click.option("--eos", default=None, help="Special token written after each document (with --bos).")(
                        click.option("--special", multiple=True, metavar="TOKEN=ID",
                                     help="A special token of a tiktoken file (repeatable).")(
                            click.option("--out", type=click.Path(path_type=Path), required=True,
                                         help="Engine tokenizer file to write.")(_import))))))))
