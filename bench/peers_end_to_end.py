"""End to end on the standard-library corpus: engine prepare vs the Hugging Face pipeline, 2 cores each.

Both sides: train character-level BPE with 8,000 merges on the train split (pre-tokenizer: the word
regex ``\\w+|[^\\w\\s]|\\s``), encode every split with BOS/EOS, then make one shuffled epoch of
T=1024 training sequences.

- engine: ``prepare(corpus, splits, tokenizer="bpe", merges=8000, threads=2)`` (streaming fit,
  encode, store), then ``MiniBatchEpoch.build(store, TRAIN, windows=CausalWindowConfig(1024, 1024),
  batches=MiniBatchConfig(8, BatchOrder.shuffled(seed)))`` (windows restart at every document).
- Hugging Face: ``datasets.load_dataset("json")``, a batched ``map`` that adds the split, ``tokenizers``
  BpeTrainer (``train_from_iterator``, vocabulary = specials + training characters + 8,000), a
  ``map(batched=True, num_proc=2)`` that encodes, the ``group_texts`` chunking of run_clm.py into
  blocks of 1024 (``num_proc=2``), and ``shuffle(seed)``. Rayon and datasets use 2 workers.

The corpus is the 90/5/5 hash split of scripts/make_stdlib_corpus.py, less the few held-out files
holding a character the train split lacks (a character-level vocabulary cannot encode them; the
Hugging Face model would drop them silently). ``rows(quick)`` uses the first ~8 MB of text.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "2")  # before tokenizers starts its thread pool

from timing import hf_parallelism, row  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
CACHE = BENCH_DIR / ".cache" / "end_to_end"
WORD_REGEX = r"\w+|[^\w\s]|\s"
MERGES = 8000
CONTEXT = 1024
THREADS = 2
SEED = 1234


def bench_corpus(quick: bool) -> tuple[Path, Path]:
    """(corpus.jsonl, splits.json): the stdlib corpus, held-out files the train alphabet cannot encode dropped."""
    from peers_store import stdlib_corpus_paths

    src_corpus, src_splits = stdlib_corpus_paths(8 if quick else None)
    out = CACHE / ("quick" if quick else "full")
    corpus_path, splits_path = out / "corpus.jsonl", out / "splits.json"
    if corpus_path.exists() and splits_path.exists():
        return corpus_path, splits_path
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads(Path(src_splits).read_text())
    docs = [json.loads(line) for line in Path(src_corpus).read_text(encoding="utf-8").splitlines() if line.strip()]
    train = set(manifest["train"])
    alphabet = set()
    for doc in docs:
        if doc["id"] in train:
            alphabet.update(doc["text"])
    kept = [d for d in docs if d["id"] in train or set(d["text"]) <= alphabet]
    kept_ids = {d["id"] for d in kept}
    corpus_path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in kept), encoding="utf-8")
    splits_path.write_text(json.dumps({k: [i for i in v if i in kept_ids] for k, v in manifest.items()}))
    return corpus_path, splits_path


def run_engine(corpus_path: Path, splits_path: Path, work: Path) -> dict[str, float]:
    from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
    from engine.corpus import Partition
    from engine.pipeline import prepare
    from engine.store import TokenStore
    from engine.windows import CausalWindowConfig

    start = time.perf_counter()
    result = prepare(corpus_path, splits_path, work / "engine", tokenizer="bpe", merges=MERGES,
                     context_length=CONTEXT, stride=CONTEXT, threads=THREADS, quiet=True)
    prepared = time.perf_counter()
    store = TokenStore.open(result.store_path)
    epoch = MiniBatchEpoch.build(store, Partition.TRAIN, windows=CausalWindowConfig(CONTEXT, CONTEXT),
                                 batches=MiniBatchConfig(8, BatchOrder.shuffled(SEED)))
    epoch.batch(0)
    done = time.perf_counter()
    seconds = result.report["seconds"]
    return {"train tokenizer (read + count + merges)": seconds["fit"], "encode + write": seconds["encode"],
            "shuffled epoch index": done - prepared, "total": done - start, "sequences": float(epoch.window_count)}


def run_huggingface(corpus_path: Path, splits_path: Path, work: Path) -> dict[str, float]:
    import datasets
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    datasets.disable_progress_bars()
    cache = work / "hf-cache"
    manifest = json.loads(splits_path.read_text())
    where = {doc_id: split for split, ids in manifest.items() for doc_id in ids}
    start = time.perf_counter()
    raw = datasets.load_dataset("json", data_files=str(corpus_path), split="train", cache_dir=str(cache))
    raw = raw.map(lambda b: {"split": [where[i] for i in b["id"]]}, batched=True)
    train = raw.filter(lambda b: [s == "train" for s in b["split"]], batched=True)
    alphabet = set()
    for text in train["text"]:
        alphabet.update(text)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(WORD_REGEX), behavior="isolated")
    trainer = trainers.BpeTrainer(vocab_size=2 + len(alphabet) + MERGES, special_tokens=["<bos>", "<eos>"],
                                  show_progress=False)
    tok.train_from_iterator((train[i : i + 1000]["text"] for i in range(0, len(train), 1000)), trainer=trainer,
                            length=len(train))
    trained = time.perf_counter()
    bos, eos = tok.token_to_id("<bos>"), tok.token_to_id("<eos>")

    def encode(batch):
        return {"input_ids": [[bos] + e.ids + [eos] for e in tok.encode_batch(batch["text"])]}

    encoded = raw.map(encode, batched=True, num_proc=THREADS, remove_columns=["text", "id"])
    done_encoding = time.perf_counter()

    def group_texts(examples):  # run_clm.py
        concatenated = {k: sum(examples[k], []) for k in examples.keys()}
        total_length = (len(concatenated["input_ids"]) // CONTEXT) * CONTEXT
        result = {k: [t[i : i + CONTEXT] for i in range(0, total_length, CONTEXT)] for k, t in concatenated.items()}
        result["labels"] = result["input_ids"].copy()
        return result

    train_ids = encoded.filter(lambda b: [s == "train" for s in b["split"]], batched=True).remove_columns(["split"])
    grouped = train_ids.map(group_texts, batched=True, num_proc=THREADS)
    shuffled = grouped.shuffle(seed=SEED)
    shuffled[0]
    done = time.perf_counter()
    return {"train tokenizer (read + count + merges)": trained - start, "encode + write": done_encoding - trained,
            "shuffled epoch index": done - done_encoding, "total": done - start, "sequences": float(len(shuffled))}


def compare(quick: bool) -> dict[str, dict[str, float]]:
    from engine.warmup import warmup

    corpus_path, splits_path = bench_corpus(quick)
    warmup(["prepare", "batches"])  # a first run's kernel compilation stays out of the timing (bench_cold_start has it)
    work = Path(tempfile.mkdtemp(prefix="engine-e2e-"))
    try:
        results = {"engine": run_engine(corpus_path, splits_path, work)}
        try:
            import datasets  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError:
            return results
        with hf_parallelism(True):  # 2 cores each (the one-thread rows of other areas turn it off)
            results["huggingface"] = run_huggingface(corpus_path, splits_path, work)
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def rows(quick: bool) -> list[dict]:
    results = compare(quick)
    engine, peer = results["engine"], results.get("huggingface")
    if peer is None:
        return []
    out = []
    for stage in ("train tokenizer (read + count + merges)", "encode + write", "shuffled epoch index", "total"):
        out.append(row(f"end to end{' (quick)' if quick else ''}: {stage}", engine[stage],
                       "HF tokenizers + datasets.map + group_texts", peer[stage],
                       at_least=5 if stage == "total" else None))
    return out


def table(results: dict[str, dict[str, float]]) -> str:
    stages = [k for k in results["engine"] if k != "sequences"]
    lines = [f"{'stage':<42}{'engine':>10}{'HF':>10}{'ratio':>8}"]
    for stage in stages:
        e, h = results["engine"][stage], results.get("huggingface", {}).get(stage, float("nan"))
        lines.append(f"{stage:<42}{e:>9.2f}s{h:>9.2f}s{h / e:>7.1f}x")
    lines.append(f"{'training sequences of 1024':<42}{results['engine']['sequences']:>10,.0f}"
                 f"{results.get('huggingface', {}).get('sequences', float('nan')):>10,.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(table(compare("--quick" in sys.argv)))
