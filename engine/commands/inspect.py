"""``engine inspect STORE``: what a token store holds, per split, without reading its tokens.

Reads only the manifest and each file's Parquet footer (``TokenStore.open``); ``--verify`` also
hashes every file against the manifest's sha256, counts each split's documents and tokens against
the manifest, checks the saved tokenizer's content hash, and refuses files in the split folders
that the manifest does not list (``TokenStore.verify``).
"""

from __future__ import annotations

import json

import click

from engine.commands._options import json_option, store_argument
from engine.store import TokenStore


def store_summary(store: TokenStore) -> dict:
    """Plain-JSON facts about ``store``: format, tokenizer, and documents/tokens per split."""
    splits = {p.value: {"documents": store.num_documents(p), "tokens": store.num_tokens(p)} for p in store.partitions}
    return {
        "path": str(store.path),
        "format_version": store.format_version,
        "tokenizer_hash": store.tokenizer_hash,
        "bos_id": store.bos_id,
        "eos_id": store.eos_id,
        **({"roles": True} if store.has_roles else {}),  # chat / instruction data only
        "splits": splits,
        "total": {
            "documents": sum(s["documents"] for s in splits.values()),
            "tokens": sum(s["tokens"] for s in splits.values()),
        },
    }


def format_summary(summary: dict) -> str:
    lines = [
        f"store           {summary['path']}",
        f"format version  {summary['format_version']}",
        f"tokenizer hash  {summary['tokenizer_hash']}",
        f"bos / eos ids   {'none' if summary['bos_id'] is None else summary['bos_id']} / {summary['eos_id']}",
        *(["role flags      yes (one per token: chat / instruction data)"] if summary.get("roles") else []),
        "",
        f"{'split':<12}{'documents':>12}{'tokens':>16}",
    ]
    rows = list(summary["splits"].items()) + [("total", summary["total"])]
    for name, counts in rows:
        lines.append(f"{name:<12}{counts['documents']:>12,}{counts['tokens']:>16,}")
    if "verified" in summary:
        lines += ["", f"verified: {summary['verified']['files']:,} files, sha256 match the manifest"]
    return "\n".join(lines)


@click.command(name="inspect")
@store_argument
@json_option
@click.option("--verify", is_flag=True,
              help="Also check every file's sha256, the document and token counts, the saved tokenizer's hash, "
                   "and that split folders hold no unlisted file.")
def command(store_path: str, as_json: bool, verify: bool) -> None:
    """Show a token store: documents and tokens per split, tokenizer hash, BOS/EOS, format version.

    \b
    Example:
      engine inspect out/store
      engine inspect out/store --json --verify
    """
    store = TokenStore.open(store_path)
    files = store.verify() if verify else None  # raises on the first mismatch
    summary = store_summary(store)
    if verify:
        summary["verified"] = {"files": files, "ok": True}
    click.echo(json.dumps(summary, indent=2) if as_json else format_summary(summary))
