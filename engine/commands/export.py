"""``engine export``: one split of a token store in a trainer's format (the rules of engine.export).

``engine export STORE --split S --format megatron|nanogpt --out PATH [--no-bos] [--dtype D] [--force]
[--json]`` writes ``PATH.bin`` / ``PATH.idx`` (Megatron's indexed dataset) or the flat file ``PATH``
(nanoGPT), with ``PATH.json`` beside, and prints what it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from engine.commands._options import json_option, split_option, store_argument
from engine.export import DTYPES, FORMATS, export


@click.command("export")
@store_argument
@split_option
@click.option("--format", "kind", required=True, type=click.Choice(FORMATS),
              help="megatron: PATH.bin + PATH.idx, Megatron's indexed dataset (Megatron-LM, NeMo, GPT-NeoX); "
                   "nanogpt: one flat file PATH of token ids (nanoGPT's train.bin). "
                   "Example: --format megatron --out out/train_text_document")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="megatron: the prefix (PATH.bin, PATH.idx); nanogpt: the file. PATH.json describes them. "
                   "Example: --out out/train.bin")
@click.option("--no-bos", "no_bos", is_flag=True,
              help="Write every document without its BOS (for trainers that expect none). A store whose BOS "
                   "is its EOS (GPT-2 style) is always written as [content..., EOS]. Example: --no-bos")
@click.option("--dtype", "dtype", default=None, type=click.Choice(sorted({d for v in DTYPES.values() for d in v})),
              help="Token dtype instead of the one chosen from the vocabulary (megatron: uint16 below 65,500 "
                   "tokens, else int32; nanogpt: uint16 up to 65,536, else uint32). Example: --dtype int32")
@click.option("--force", is_flag=True,
              help="Replace files at PATH that engine export did not write (never a folder or a link). "
                   "Example: --force")
@json_option
def command(store_path: Path, split: str, kind: str, out: Path, no_bos: bool, dtype: str | None, force: bool,
            as_json: bool) -> None:
    """Export one split of a token store for a trainer: Megatron .bin/.idx or a nanoGPT flat file.

    Documents are written as stored ([BOS, content..., EOS]); --no-bos drops each BOS; when BOS is
    EOS (GPT-2 style) one EOS separates two documents. Files are written under temporary names and
    renamed into place.

    \b
    Example:
      engine export out --split train --format megatron --out out/megatron/train_text_document
      engine export out --split validation --format nanogpt --out out/val.bin --no-bos
    """
    result = export(store_path, split, out, format=kind, bos=not no_bos, dtype=dtype, force=force)
    if as_json:
        click.echo(json.dumps(result.to_dict()))
        return
    click.echo(f"wrote {', '.join(str(f) for f in result.files)} and {result.marker} ({kind}, {result.dtype}): "
               f"{result.documents:,} documents, {result.tokens:,} tokens"
               f"{', BOS dropped' if result.bos_dropped else ''}")
