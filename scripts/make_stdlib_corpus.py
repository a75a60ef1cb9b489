"""Make a real multi-document corpus from the running Python's standard library.

Every ``.py`` file below ``sysconfig.get_paths()["stdlib"]`` (site-packages and __pycache__
skipped), sorted by relative path, becomes one document: id = relative POSIX path, text = its
UTF-8 contents (files that are not UTF-8 are skipped and counted). Partitions come from the hash
split 90/5/5, so the same file always lands in the same partition on every machine.

    $ python scripts/make_stdlib_corpus.py --out bench/.cache/stdlib
    documents 1,786   text 31.5 MB   skipped (not UTF-8) 4
    train 1,606   validation 84   test 96
    wrote bench/.cache/stdlib/corpus.jsonl and bench/.cache/stdlib/splits.json

(Counts for CPython 3.11; they depend on the version.) ``--limit-mb N`` stops after about N MB of text.
"""

from __future__ import annotations

import argparse
import json
import sysconfig
from pathlib import Path

from engine.corpus import SplitManifest

RATIOS = {"train": 0.9, "validation": 0.05, "test": 0.05}


def stdlib_files() -> tuple[Path, list[str]]:
    root = Path(sysconfig.get_paths()["stdlib"])
    names = (p.relative_to(root).as_posix() for p in root.rglob("*.py") if p.is_file())
    return root, sorted(n for n in names if not {"site-packages", "dist-packages", "__pycache__"} & set(n.split("/")))


def make_stdlib_corpus(out_dir, limit_mb: float | None = None, *, quiet: bool = True) -> tuple[Path, Path]:
    """Write ``out_dir/corpus.jsonl`` and ``out_dir/splits.json``; returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus_path, splits_path = out_dir / "corpus.jsonl", out_dir / "splits.json"
    root, names = stdlib_files()
    ids, total_bytes, skipped = [], 0, 0
    tmp = corpus_path.with_name(corpus_path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for name in names:
            raw = (root / name).read_bytes()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                skipped += 1
                continue
            out.write(json.dumps({"id": name, "text": text}, ensure_ascii=False) + "\n")
            ids.append(name)
            total_bytes += len(raw)
            if limit_mb is not None and total_bytes >= limit_mb * 1e6:
                break
    tmp.replace(corpus_path)
    manifest = SplitManifest.by_hash(RATIOS).assign(ids)
    manifest.to_json(splits_path)
    if not quiet:
        counts = "   ".join(f"{p.value} {n:,}" for p, n in manifest.counts().items())
        print(f"documents {len(ids):,}   text {total_bytes / 1e6:.1f} MB   skipped (not UTF-8) {skipped}")
        print(counts)
        print(f"wrote {corpus_path} and {splits_path}")
    return corpus_path, splits_path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--limit-mb", type=float, default=None, help="stop after about this many MB of text")
    args = parser.parse_args()
    make_stdlib_corpus(args.out, args.limit_mb, quiet=False)
