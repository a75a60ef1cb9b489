"""Megatron's indexed dataset from a JSONL corpus: engine prepare + export beside the work Megatron-LM's
``tools/preprocess_data.py`` does, 2 cores each; and export alone against a memory copy.

Corpus: the standard-library corpus of scripts/make_stdlib_corpus.py (about 32 MB of .py files;
the first ~8 MB with ``quick``), less its empty files (``preprocess_data.py`` gives an empty text no
sequence at all, engine writes ``[EOS]`` for it: the outputs could not be compared), every document
in train. Tokenizer: a byte-level BPE of 32,768 tokens (4,096 with ``quick``) trained on the stdlib
by engine (``peers_byte_bpe.trained_tokenizer``, cached in bench/.cache) and written as a Hugging Face
``tokenizer.json``; both sides read that file. Documents end with ``<eos>`` and carry no BOS.

- engine: ``prepare(corpus, splits, tokenizer=tokenizer.json, threads=2)`` (read, encode, store),
  then ``export_megatron(store, "train", prefix, bos=False)``.
- peer (bench/megatron_peer.py, a module its worker processes can import): ``preprocess_data.py``'s
  loop: ``multiprocessing.Pool(2)`` whose workers load the ``tokenizer.json`` with Hugging Face
  ``tokenizers`` and map ``json.loads`` + ``encode(text, add_special_tokens=False).ids`` + the
  end-of-document id over the lines (``imap``, chunks of 32), the main process
  ``IndexedDatasetBuilder.add_document(ids, [len(ids)])`` per document (dtype
  ``DType.optimal_dtype(vocab size)``), then ``finalize``. (Megatron's own tokenizer wrapper would
  add Python overhead on top of ``tokenizers``; this is its fastest form.)

Each side runs 3 times in turns (once with ``quick``); the fastest run counts. Both ``.bin`` and
both ``.idx`` are compared byte for byte before a row is made (a difference raises). The engine side
loads the ``tokenizer.json`` once (``prepare``; ``export`` reads the vocabulary size from the store's
manifest), as the two commands do. ``export alone`` times ``export_megatron`` of the prepared store
(decode the Parquet row groups on two threads, drop nothing, write uint16, fsync, rename) beside
``np.copyto`` of the split's uint32 token
buffer (the bytes export reads, copied once in memory): ratio = copy seconds / export seconds; an
information row puts it beside one ``write`` + ``fsync`` of the same ``.bin`` bytes. A first run's
kernel loading is kept out of the timing by one untimed run on the corpus's first 200 lines.
Run: ``python bench/peers_export.py [--quick]``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from megatron_peer import run_preprocess_data
from timing import best_of, row

BENCH_DIR = Path(__file__).resolve().parent
CACHE = BENCH_DIR / ".cache" / "export"
THREADS = 2


def bench_inputs(quick: bool) -> tuple[Path, Path, Path]:
    """(corpus.jsonl, splits.json, tokenizer.json): the stdlib corpus without empty texts, all in train."""
    from peers_byte_bpe import stdlib_texts, trained_tokenizer
    from peers_store import stdlib_corpus_paths

    from engine.tokenizers.interop import save_hf_tokenizer_json

    out = CACHE / ("quick" if quick else "full")
    corpus, splits, tokenizer = out / "corpus.jsonl", out / "splits.json", out / "tokenizer.json"
    if corpus.exists() and splits.exists() and tokenizer.exists():
        return corpus, splits, tokenizer
    out.mkdir(parents=True, exist_ok=True)
    src, _ = stdlib_corpus_paths(8 if quick else None)
    ids, lines = [], []
    for line in Path(src).read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        if doc["text"]:
            ids.append(doc["id"])
            lines.append(json.dumps({"id": doc["id"], "text": doc["text"]}, ensure_ascii=False) + "\n")
    corpus.write_text("".join(lines), encoding="utf-8")
    splits.write_text(json.dumps({"train": ids, "validation": [], "test": []}))
    vocab = 4096 if quick else 32768
    texts = stdlib_texts(3_000_000) if quick else stdlib_texts()
    save_hf_tokenizer_json(trained_tokenizer(texts, vocab, "quick" if quick else "full"), tokenizer)
    return corpus, splits, tokenizer


def run_engine(corpus: Path, splits: Path, tokenizer: Path, work: Path) -> tuple[float, Path, Path]:
    from engine.export import export_megatron
    from engine.pipeline import prepare

    start = time.perf_counter()
    result = prepare(corpus, splits, work / "engine", tokenizer=str(tokenizer), threads=THREADS, quiet=True)
    export_megatron(result.store_path, "train", work / "engine-train", bos=False)
    return time.perf_counter() - start, result.store_path, work / "engine-train"


def _same_pair(a: Path, b: Path) -> None:
    for ext in (".bin", ".idx"):
        x, y = Path(str(a) + ext), Path(str(b) + ext)
        if x.read_bytes() != y.read_bytes():
            raise AssertionError(f"{x} and {y} differ ({x.stat().st_size} and {y.stat().st_size} bytes)")


def compare(quick: bool) -> dict:
    from engine.export import export_megatron
    from engine.store import TokenStore
    from engine.tokenizers.loading import load_tokenizer
    from engine.warmup import warmup

    corpus, splits, tokenizer = bench_inputs(quick)
    warmup(["prepare"])
    eod = load_tokenizer(tokenizer).eos_id
    work = Path(tempfile.mkdtemp(prefix="engine-export-"))
    try:
        # A first run's kernel loading stays out of the timing (bench_cold_start has it): one untimed
        # prepare + export of the first 200 lines with the same tokenizer file.
        (work / "warm").mkdir()
        with open(corpus, encoding="utf-8") as fh:
            head = [next(fh) for _ in range(200)]
        (work / "warm" / "corpus.jsonl").write_text("".join(head), encoding="utf-8")
        (work / "warm" / "splits.json").write_text(json.dumps(
            {"train": [json.loads(line)["id"] for line in head], "validation": [], "test": []}))
        run_engine(work / "warm" / "corpus.jsonl", work / "warm" / "splits.json", tokenizer, work / "warm")
        os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process, as preprocess_data runs
        engine_runs, peer_runs = [], []
        for _ in range(1 if quick else 3):  # in turns, so both see the same moments of a shared machine
            for folder in ("engine", "engine-train.bin", "engine-train.idx", "engine-train.json"):
                path = work / folder
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
            seconds, store_path, engine_prefix = run_engine(corpus, splits, tokenizer, work)
            engine_runs.append(seconds)
            seconds, peer_prefix = run_preprocess_data(corpus, tokenizer, eod, work)
            peer_runs.append(seconds)
        _same_pair(engine_prefix, peer_prefix)
        store = TokenStore.open(store_path)
        export_s = best_of(lambda: export_megatron(store, "train", work / "again", bos=False), 3, warmup=True)
        values, _ = store.arrays("train")
        target = np.empty_like(values)
        copy_s = best_of(lambda: np.copyto(target, values), 5, warmup=True)
        data = Path(str(engine_prefix) + ".bin").read_bytes()

        def write_file():
            with open(work / "plain.bin", "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())

        write_s = best_of(write_file, 3, warmup=True)
        return {"engine_s": min(engine_runs), "peer_s": min(peer_runs), "export_s": export_s, "copy_s": copy_s,
                "write_s": write_s,
                "tokens": int(values.shape[0]), "bytes": int(Path(str(engine_prefix) + ".bin").stat().st_size),
                "corpus_bytes": corpus.stat().st_size}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def rows(quick: bool) -> list[dict]:
    try:
        import megatron.core.datasets.indexed_dataset  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError:
        return []
    r = compare(quick)
    label = " (quick)" if quick else ""
    mb = r["corpus_bytes"] / 1e6
    return [
        row(f"export{label}: prepare + export --format megatron, {mb:.0f} MB stdlib, 2 cores", r["engine_s"],
            "preprocess_data.py (json.loads + HF tokenizers encode + IndexedDatasetBuilder, 2 workers)",
            r["peer_s"], at_least=10, note="identical .bin/.idx"),
        row(f"export{label}: export alone, {r['tokens']:,} tokens -> {r['bytes'] / 1e6:.0f} MB uint16",
            r["export_s"], "np.copyto of the split's uint32 tokens (memory bandwidth)", r["copy_s"],
            at_least=0.5, note="ratio = copy s / export s"),
        row(f"export{label}: export alone vs writing its .bin bytes to a file (write + fsync)", r["export_s"],
            "one write + fsync of the same bytes (the storage floor)", r["write_s"],
            info="what the file system costs; export also decodes the Parquet store"),
    ]


if __name__ == "__main__":
    import sys

    quick = "--quick" in sys.argv
    result = compare(quick)
    print(json.dumps(result, indent=1))
    print(f"prepare + export vs preprocess_data: {result['peer_s'] / result['engine_s']:.1f}x; "
          f"export alone vs copy: {result['copy_s'] / result['export_s']:.2f}x")
