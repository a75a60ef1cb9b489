"""SIGKILL ``engine prepare`` at seeded random points; the output must stay the previous complete result.

A complete run writes OUT first. Then runs over the same OUT are killed while reading, fitting,
encoding and writing. After every kill: ``OUT/store`` is either exactly the previous store (same
manifest, same tokens, sha256 verified) or absent; nothing that is not hidden and named as a
temporary was left behind; the stale lock of the killed pid does not block the next run. A final
run completes and reproduces the store.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engine.errors import StoreError
from engine.store import MANIFEST_NAME, TokenStore

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")

CORPUS_BYTES = 30_000_000
DOCUMENTS = 6000
KILLS = 5
SEED = 20240611


def make_corpus(directory: Path) -> tuple[Path, Path]:
    """~30 MB of JSONL documents made of random words, and a manifest (80/10/10)."""
    rng = np.random.default_rng(SEED)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = np.array(["".join(rng.choice(letters, size=int(rng.integers(2, 9)))) for _ in range(3000)])
    words_per_document = CORPUS_BYTES // DOCUMENTS // 6  # words average ~5.5 characters and a space
    ids, lines = [], []
    for i in range(DOCUMENTS):
        count = int(rng.integers(words_per_document // 2, words_per_document * 3 // 2))
        text = " ".join(vocabulary[rng.integers(0, vocabulary.shape[0], size=count)])
        ids.append(f"doc-{i}")
        lines.append(json.dumps({"id": ids[-1], "text": text}))
    corpus = directory / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    splits = directory / "splits.json"
    cut1, cut2 = DOCUMENTS * 8 // 10, DOCUMENTS * 9 // 10
    splits.write_text(json.dumps({"train": ids[:cut1], "validation": ids[cut1:cut2], "test": ids[cut2:]}))
    return corpus, splits


def start_prepare(corpus: Path, splits: Path, out: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "engine", "prepare", str(corpus), "--splits", str(splits), "--out", str(out),
               "--tokenizer", "char", "--quiet", "--threads", "2"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def snapshot(store_path: Path) -> tuple[dict, dict]:
    """(manifest, {split: (ids, values, offsets)}) of a verified store."""
    store = TokenStore.open(store_path)
    store.verify()
    data = {}
    for part in store.partitions:
        values, offsets = store.arrays(part)
        data[part.value] = (store.ids(part), values.copy(), offsets.copy())
    return json.loads((store_path / MANIFEST_NAME).read_text()), data


def assert_same_store(store_path: Path, expected: tuple[dict, dict]) -> None:
    manifest, data = snapshot(store_path)
    assert manifest == expected[0]
    for split, (ids, values, offsets) in expected[1].items():
        found_ids, found_values, found_offsets = data[split]
        assert found_ids == ids and np.array_equal(found_values, values) and np.array_equal(found_offsets, offsets)


def assert_only_temporaries_left(out: Path) -> None:
    """Anything besides the results and the lock is hidden and named as a temporary, never as the store."""
    results = {"store", "tokenizer.json", "report.json", "store.lock"}
    for entry in os.listdir(out):
        if entry in results:
            continue
        assert entry.startswith("."), f"{out / entry} left behind by a killed run looks like a result"
        assert ".tmp" in entry or ".old-" in entry or entry.startswith(".store.lock."), entry


def kill_after(process: subprocess.Popen, delay: float) -> bool:
    """SIGKILL ``process`` after ``delay`` seconds; False if it had already finished."""
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    return True


def kill_while_writing(process: subprocess.Popen, out: Path, extra: float) -> bool:
    """SIGKILL once the run's temporary store directory exists (pass 2: encoding and writing), plus ``extra`` s."""
    temporary = out / f".store.tmp-{process.pid}"
    while not temporary.exists():
        if process.poll() is not None:
            return False
        time.sleep(0.002)
    return kill_after(process, extra)


def test_sigkill_at_random_points_leaves_the_previous_store_or_none(tmp_path):
    corpus, splits = make_corpus(tmp_path)
    out = tmp_path / "out"

    # No previous result: a run killed while writing leaves no store at all.
    fresh = start_prepare(corpus, splits, out)
    assert kill_while_writing(fresh, out, 0.2), "the run finished before it could be killed"
    fresh.stderr.close()
    assert not (out / "store").exists()
    with pytest.raises(StoreError, match="no token store here"):
        TokenStore.open(out / "store")
    assert_only_temporaries_left(out)

    started = time.monotonic()
    first = start_prepare(corpus, splits, out)
    assert first.wait(timeout=120) == 0, first.stderr.read()
    first.stderr.close()
    full_run = time.monotonic() - started
    previous = snapshot(out / "store")
    tokenizer_bytes = (out / "tokenizer.json").read_bytes()
    report = json.loads((out / "report.json").read_text())
    assert report["partitions"]["train"]["documents"] == DOCUMENTS * 8 // 10

    rng = random.Random(SEED)
    # Spread over the whole run (start-up, reading and fitting, encoding, writing, committing).
    delays = sorted(rng.uniform(0.1, 0.95) * full_run for _ in range(KILLS))
    killed = 0
    for attempt in range(KILLS + 1):
        process = start_prepare(corpus, splits, out)
        if attempt < KILLS:
            was_killed = kill_after(process, delays[attempt])
        else:
            was_killed = kill_while_writing(process, out, rng.uniform(0.0, 0.3))
        if not was_killed:
            assert process.wait(timeout=60) == 0, process.stderr.read()
        killed += was_killed
        assert_only_temporaries_left(out)
        if (out / "store").exists():
            assert_same_store(out / "store", previous)
        lock = out / "store.lock"
        if was_killed and lock.exists():
            assert lock.read_text().strip() == str(process.pid)  # stale: its writer is dead
        process.stderr.close()
    assert killed >= KILLS - 1, f"only {killed} of {KILLS + 1} runs were still running when killed"

    final = start_prepare(corpus, splits, out)
    assert final.wait(timeout=120) == 0, final.stderr.read()
    final.stderr.close()
    assert_same_store(out / "store", previous)
    assert (out / "tokenizer.json").read_bytes() == tokenizer_bytes
    assert json.loads((out / "report.json").read_text())["partitions"] == report["partitions"]
    assert not (out / "store.lock").exists()
    # The writer clears the temporaries of dead writers of this store (directories and lock drafts).
    leftovers = [entry for entry in os.listdir(out) if entry.startswith(".store.")]
    assert leftovers == [], f"the completed run did not clear {leftovers}"
