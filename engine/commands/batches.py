"""``engine batches``: the windows and mini-batches of one split of a token store.

``engine batches STORE --split train --context T --stride S --batch-size B [--seed N | --sequential]``
builds the epoch (``MiniBatchEpoch``), prints its window and batch counts and the shapes of the
first and last batch, optionally audits it (``--audit``) and writes its descriptor index
(``--out DIR``): ``DIR/index.parquet`` with int64 columns ``document_index`` and ``start`` in epoch
order, then ``DIR/manifest.json`` (seed, T, S, B, counts, store path, tokenizer hash, sha256 of
the index, and the sha256 of the store's own manifest ``_engine.json``, which lists every store
file's sha256, so it names the exact store). Each file is written under a temporary name and
renamed, manifest last. ``engine batches show DIR --batch K`` rebuilds batch K from that index: it
checks every manifest field, re-opens the store named in the manifest, refuses any store but the
one the index was built from (tokenizer hash, then the store manifest's sha256), checks the
index's sha256 and prints the rows (document ids with control characters escaped as in ``repr``).

``batches`` is a group whose default subcommand is ``build``: a first argument that is not a
subcommand name is taken as the store (``engine batches build show`` reaches a store named "show").
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import click

from engine.commands._options import store_argument
from engine.errors import BatchError, ConfigurationError, StoreError
from engine.store import MANIFEST_NAME as STORE_MANIFEST_NAME

MANIFEST_FORMAT = "engine.batches"
MANIFEST_VERSION = 2  # 2: records store_manifest_sha256
INDEX_NAME = "index.parquet"
MANIFEST_NAME = "manifest.json"


class _StoreOrSubcommand(click.Group):
    """Runs ``build`` when the first argument is not a subcommand name."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["build", *args]
        return super().parse_args(ctx, args)


@click.group("batches", cls=_StoreOrSubcommand)
def command() -> None:
    """Cut a split of a token store into shuffled mini-batches of causal windows.

    `engine batches STORE ...` is short for `engine batches build STORE ...`.

    \b
    Example:
      engine batches out/store --split train --context 64 --batch-size 32 --seed 7 --audit
      engine batches out/store --context 64 --batch-size 32 --sequential --out out/epoch
      engine batches show out/epoch --batch 3
    """


@command.command("build")
@store_argument
@click.option("--split", default="train", show_default=True, type=click.Choice(["train", "validation", "test"]))
@click.option("--context", "context_length", type=int, required=True, help="Context length T (tokens per row).")
@click.option("--stride", type=int, default=1, show_default=True, help="Distance S between window starts.")
@click.option("--batch-size", type=int, required=True, help="Rows per batch B (the last batch holds the rest).")
@click.option("--seed", type=int, default=None, help="Shuffle seed, 0..2^64-1 [default: 0].")
@click.option("--sequential", is_flag=True, help="Keep document order instead of shuffling.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the descriptor index and manifest here.")
@click.option("--audit", is_flag=True, help="Check coverage, duplicates, padding, partitions and replay.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def build_command(store_path, split, context_length, stride, batch_size, seed, sequential, out_dir, audit,
                  as_json) -> None:
    """Build the epoch of one split and print its counts and batch shapes.

    \b
    Example:
      engine batches out/store --split train --context 64 --stride 1 --batch-size 32 --seed 7
      engine batches build out/store --context 8 --batch-size 4 --sequential --audit --json
    """
    from engine.audit import audit_epoch
    from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
    from engine.store import TokenStore
    from engine.windows import CausalWindowConfig

    if sequential and seed is not None:
        raise ConfigurationError("--seed and --sequential conflict: pass one of them")
    order = BatchOrder.sequential() if sequential else BatchOrder.shuffled(0 if seed is None else seed)
    windows = CausalWindowConfig(context_length, stride)
    batches = MiniBatchConfig(batch_size, order)
    store_digest = store_manifest_digest(Path(store_path))
    store = TokenStore.open(store_path)
    epoch = MiniBatchEpoch.build(store, split, windows=windows, batches=batches)
    values, _ = store.arrays(split)
    count = epoch.batch_count
    report = {
        "store": str(Path(store.path).resolve()),
        "tokenizer_hash": store.tokenizer_hash,
        "store_manifest_sha256": store_digest,
        "split": split,
        "documents": len(epoch.document_ids),
        "tokens": int(values.shape[0]),
        "context_length": windows.context_length,
        "stride": windows.stride,
        "batch_size": batches.batch_size,
        "order": "shuffled" if order.is_shuffled else "sequential",
        "seed": order.seed,
        "window_count": epoch.window_count,
        "batch_count": count,
        "first_batch_shape": [epoch.batch_width(0), windows.context_length] if count else None,
        "last_batch_shape": [epoch.batch_width(count - 1), windows.context_length] if count else None,
        "shuffle_state_after": epoch.shuffle_state_after,
        "audit": None,
        "out": None,
    }
    audit_report = audit_epoch(epoch) if audit else None
    if audit_report is not None:
        report["audit"] = audit_report.to_dict()
    if out_dir is not None:
        if store_manifest_digest(Path(store_path)) != store_digest:
            raise StoreError(f"{store_path}: the store was rewritten while the epoch was built; build it again")
        report["out"] = write_index(epoch, store, out_dir, report)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(format_build(report, audit_report))
    if audit_report is not None and not audit_report.ok:
        raise BatchError(f"epoch audit failed: {audit_report.summary()}")


def format_build(report: dict, audit_report) -> str:
    order = f"shuffled, seed {report['seed']}" if report["seed"] is not None else "sequential"
    shape = lambda s: "-" if s is None else f"[{s[0]}, {s[1]}]"  # noqa: E731
    lines = [
        f"store        {report['store']} (tokenizer {report['tokenizer_hash'][:12]})",
        f"split        {report['split']}: {report['documents']} documents, {report['tokens']} tokens",
        f"windows      {report['window_count']} (T={report['context_length']}, S={report['stride']})",
        f"batches      {report['batch_count']} of up to {report['batch_size']} rows ({order})",
        f"first batch  {shape(report['first_batch_shape'])}",
        f"last batch   {shape(report['last_batch_shape'])}",
    ]
    if audit_report is not None:
        lines.append(f"audit        {audit_report.summary()}")
    if report["out"] is not None:
        lines.append(f"wrote        {report['out']['index']} and {report['out']['manifest']}")
    return "\n".join(lines)


def _replace_atomically(path: Path, write) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


def write_index(epoch, store, out_dir: Path, report: dict) -> dict:
    """Write ``index.parquet`` then ``manifest.json`` into ``out_dir``; return their paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out_dir.mkdir(parents=True, exist_ok=True)
    document_index, start = epoch.descriptors()
    table = pa.table({"document_index": pa.array(document_index, pa.int64()), "start": pa.array(start, pa.int64())})
    index_path = out_dir / INDEX_NAME
    _replace_atomically(index_path, lambda p: pq.write_table(table, p))
    with open(index_path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        **{key: report[key] for key in ("store", "tokenizer_hash", "store_manifest_sha256", "split", "context_length", "stride",
                                        "batch_size", "order", "seed", "window_count", "batch_count",
                                        "shuffle_state_after")},
        "document_count": report["documents"],
        "index": {"file": INDEX_NAME, "sha256": digest, "columns": ["document_index", "start"]},
    }
    manifest_path = out_dir / MANIFEST_NAME
    _replace_atomically(manifest_path, lambda p: p.write_text(json.dumps(manifest, indent=2) + "\n"))
    return {"index": str(index_path), "manifest": str(manifest_path), "index_sha256": digest}


def store_manifest_digest(store_path: Path) -> str:
    """sha256 of a store's manifest (``_engine.json``): it lists every store file's sha256, so equal
    digests mean the same store content."""
    path = store_path / STORE_MANIFEST_NAME
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except FileNotFoundError:
        raise StoreError(f"{path}: not found; {store_path} is not a complete token store") from None


def _printable(text: str) -> str:
    """``text`` itself when it is printable, else its ``repr`` (newlines and control characters escaped)."""
    return text if text.isprintable() else repr(text)


def _count(manifest: dict, key: str, path: Path, low: int) -> int:
    value = manifest.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise StoreError(f'{path}: "{key}" is {type(value).__name__} {value!r:.40}, expected an integer >= {low}')
    if value < low:
        raise StoreError(f'{path}: "{key}" is {value}, expected an integer >= {low}')
    return value


def check_manifest(manifest: dict, path: Path) -> None:
    """StoreError naming the first field of an epoch manifest that is missing, mistyped or inconsistent."""
    from engine.corpus import PARTITIONS

    for key, expected in (("store", "a path string"), ("tokenizer_hash", "a hash string")):
        value = manifest.get(key)
        if not isinstance(value, str) or not value:
            raise StoreError(f'{path}: "{key}" is {type(value).__name__} {value!r:.40}, expected {expected}')
    digest = manifest.get("store_manifest_sha256")
    if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
        raise StoreError(f'{path}: "store_manifest_sha256" is {type(digest).__name__} {digest!r:.70}, '
                         "expected a sha256 hex string")
    names = [p.value for p in PARTITIONS]
    if manifest.get("split") not in names:
        raise StoreError(f'{path}: "split" is {manifest.get("split")!r:.40}, expected one of {", ".join(names)}')
    for key, low in (("context_length", 1), ("stride", 1), ("batch_size", 1), ("window_count", 0),
                     ("batch_count", 0), ("document_count", 0)):
        _count(manifest, key, path, low)
    if "seed" not in manifest:
        raise StoreError(f'{path}: "seed" is missing (expected an integer, or null for a sequential epoch)')
    seed = manifest["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise StoreError(f'{path}: "seed" is {type(seed).__name__} {seed!r:.40}, expected an integer or null')
    windows, size = manifest["window_count"], manifest["batch_size"]
    expected = -(-windows // size)
    if manifest["batch_count"] != expected:
        raise StoreError(f'{path}: "batch_count" is {manifest["batch_count"]}, but {windows} windows in batches '
                         f"of {size} make {expected}")
    index = manifest.get("index")
    if not isinstance(index, dict):
        raise StoreError(f'{path}: "index" is missing or not an object {{"file", "sha256"}}')
    file = index.get("file")
    if not isinstance(file, str) or not file or Path(file).name != file or file in (".", ".."):
        raise StoreError(f'{path}: "index.file" is {file!r:.60}, expected a file name in the epoch directory')
    if not isinstance(index.get("sha256"), str):
        raise StoreError(f'{path}: "index.sha256" is {index.get("sha256")!r:.70}, expected a sha256 hex string')


def read_manifest(directory: Path) -> dict:
    path = directory / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{path}: not found; write one with `engine batches STORE ... --out {directory}`") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise StoreError(f'{path}: not a batches manifest (expected "format": "{MANIFEST_FORMAT}")')
    version = manifest.get("version")
    if version != MANIFEST_VERSION:
        earlier = version == 1
        hint = " (it does not name the exact store; rebuild it with `engine batches STORE ... --out`)" if earlier else ""
        raise StoreError(f"{path}: manifest version {version!r:.40}, expected {MANIFEST_VERSION}{hint}")
    check_manifest(manifest, path)
    return manifest


@command.command("show")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--batch", "k", type=int, required=True, help="Batch index K (0-based).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def show_command(directory: Path, k: int, as_json: bool) -> None:
    """Rebuild batch K from a descriptor index and print its rows with provenance.

    \b
    Example:
      engine batches show out/epoch --batch 0
      engine batches show out/epoch --batch 93 --json
    """
    import pyarrow.parquet as pq

    from engine.store import TokenStore
    from engine.windows import gather_windows

    manifest = read_manifest(directory)
    index_path = directory / manifest["index"]["file"]
    if not index_path.exists():
        raise StoreError(f"{index_path}: descriptor index not found")
    with open(index_path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    if digest != manifest["index"]["sha256"]:
        raise StoreError(f"{index_path}: sha256 {digest} differs from the manifest's "
                         f"{manifest['index']['sha256']}; the index was changed after it was written")
    count, size = manifest["batch_count"], manifest["batch_size"]
    if isinstance(k, bool) or not 0 <= k < count:
        valid = f"0..{count - 1}" if count else "none: the epoch is empty"
        raise BatchError(f"batch {k} is out of range: this epoch has {count} batches (valid: {valid})")
    store = TokenStore.open(manifest["store"])
    if store.tokenizer_hash != manifest["tokenizer_hash"]:
        raise StoreError(f"{manifest['store']}: tokenizer hash {store.tokenizer_hash} differs from "
                         f"{manifest['tokenizer_hash']} recorded in {directory / MANIFEST_NAME}; the store was rewritten")
    found = store_manifest_digest(Path(manifest["store"]))
    if found != manifest["store_manifest_sha256"]:
        raise StoreError(f"{manifest['store']}: the store's manifest hashes to {found}, but the epoch index "
                         f"{directory / MANIFEST_NAME} was built from the store whose manifest hashes to "
                         f"{manifest['store_manifest_sha256']}; the store was rewritten: build the epoch again")
    split = manifest["split"]
    values, offsets = store.arrays(split)
    ids = store.ids(split)
    if len(ids) != manifest["document_count"]:
        raise StoreError(f"{manifest['store']} split={split}: {len(ids)} documents, but the manifest recorded "
                         f"{manifest['document_count']}")
    try:
        table = pq.read_table(index_path, columns=["document_index", "start"])
    except (OSError, ValueError, KeyError) as exc:
        raise StoreError(f"{index_path}: cannot read the descriptor index ({exc})") from None
    if table.num_rows != manifest["window_count"]:
        raise StoreError(f"{index_path}: holds {table.num_rows} descriptors, the manifest records "
                         f"{manifest['window_count']} windows")
    lo, hi = k * size, min((k + 1) * size, table.num_rows)
    document_index = table.column("document_index").to_numpy()[lo:hi]
    start = table.column("start").to_numpy()[lo:hi]
    T = manifest["context_length"]
    inputs, targets = gather_windows(values, offsets, document_index, start, T)
    rows = [
        {"row": r, "partition": split, "document_index": int(d), "document_id": ids[d], "start": int(s),
         "input": inputs[r].tolist(), "target": targets[r].tolist()}
        for r, (d, s) in enumerate(zip(document_index.tolist(), start.tolist()))
    ]
    result = {"batch": k, "batch_count": count, "shape": [hi - lo, T], "token_count": (hi - lo) * T,
              "store": manifest["store"], "split": split, "seed": manifest["seed"], "rows": rows}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"batch {k} of {count}: shape [{hi - lo}, {T}], {(hi - lo) * T} target tokens, "
               f"{split} split of {_printable(manifest['store'])}")
    for row in rows:
        click.echo(f"row {row['row']}: {_printable(row['document_id'])} (document {row['document_index']}) @ {row['start']}")
        click.echo(f"  input  {row['input']}")
        click.echo(f"  target {row['target']}")
