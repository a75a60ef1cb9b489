"""SIGKILL ``engine prepare`` at each stage of a run; the output must stay the previous complete result.

The kills are deterministic: ``ENGINE_TEST_STOP_AT=STAGE:N`` (engine.testhook) makes the run kill
itself the N-th time it reaches STAGE (reading, fitting, writing chunks and files, the manifest,
the swap into place, the report). The runs use small store files and chunks, so every stage is
reached several times. A run killed with no previous result leaves no store, and ``--resume``
then completes equal to a clean run. Over a complete OUT, after every kill ``OUT/store`` is
either exactly the previous store (same manifest, same tokens, sha256 verified) or absent;
nothing that is not hidden and named as a temporary was left behind; the stale lock of the
killed pid does not block the next run. A final run and a ``--resume`` run reproduce the store.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.errors import StoreError
from engine.store import MANIFEST_NAME, TokenStore
from engine.testhook import STOP_AT_VARIABLE

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")

DOCUMENTS = 400
SEED = 20240611
# Small files, row groups, chunks and read batches: every stage is reached several times.
SMALL_RUN = ("import functools, sys; import engine.pipeline as p; "
             "p.prepare = functools.partial(p.prepare, limits=p.PrepareLimits(store_file_rows=16, "
             "store_row_group_rows=4, encode_chunk_documents=8, read_batch_documents=32)); "
             "from engine.__main__ import run; sys.argv[0] = 'engine'; run()")
# The same with long documents (lines from 2,000 bytes, texts from 200), encoded in spans of 500 characters
# into an ids file.
LONG_RUN = SMALL_RUN.replace("read_batch_documents=32", "read_batch_documents=32, long_line_bytes=2000, "
                                                        "long_string_bytes=200, stream_chars=500")
# Stages of a run over a complete OUT, in the order a run reaches them.
KILL_POINTS = ["read:1", "read:5", "fitted:1", "chunk:1", "chunk:20", "file:3", "manifest:1", "swap:1", "outputs:1",
               "outputs:2", "stored:1"]


def make_corpus(directory: Path) -> tuple[Path, Path]:
    """JSONL documents made of random words, and a manifest (80/10/10)."""
    rng = np.random.default_rng(SEED)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocabulary = np.array(["".join(rng.choice(letters, size=int(rng.integers(2, 9)))) for _ in range(300)])
    ids, lines = [], []
    for i in range(DOCUMENTS):
        text = " ".join(vocabulary[rng.integers(0, vocabulary.shape[0], size=int(rng.integers(20, 200)))])
        ids.append(f"doc-{i}")
        lines.append(json.dumps({"id": ids[-1], "text": text}))
    corpus = directory / "corpus.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    splits = directory / "splits.json"
    cut1, cut2 = DOCUMENTS * 8 // 10, DOCUMENTS * 9 // 10
    splits.write_text(json.dumps({"train": ids[:cut1], "validation": ids[cut1:cut2], "test": ids[cut2:]}))
    return corpus, splits


def run_prepare(corpus: Path, splits: Path, out: Path, *, stop_at: str | None = None,
                resume: bool = False, tokenizer: str = "char", script: str = SMALL_RUN) -> int:
    """``engine prepare`` with small files and chunks; with ``stop_at`` it kills itself at that stage.
    Returns the run's pid."""
    command = [sys.executable, "-c", script, "prepare", str(corpus), "--splits", str(splits), "--out", str(out),
               "--tokenizer", tokenizer, "--quiet", "--threads", "2"] + (["--resume"] if resume else [])
    env = {key: value for key, value in os.environ.items() if key != STOP_AT_VARIABLE}
    if stop_at is not None:
        env[STOP_AT_VARIABLE] = stop_at
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    _, stderr = process.communicate(timeout=300)
    if stop_at is None:
        assert process.returncode == 0, stderr
    else:
        assert process.returncode == -signal.SIGKILL, f"{stop_at}: exit {process.returncode}, not killed\n{stderr}"
    return process.pid


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
        assert ".tmp" in entry or ".old-" in entry or ".staged-" in entry or entry.startswith(".store.lock."), entry


def assert_complete_like(out: Path, reference: Path) -> None:
    """``out`` holds the same store, tokenizer and report numbers as the clean run in ``reference``."""
    assert_same_store(out / "store", snapshot(reference / "store"))
    assert (out / "tokenizer.json").read_bytes() == (reference / "tokenizer.json").read_bytes()
    report = json.loads((out / "report.json").read_text())
    assert report["partitions"] == json.loads((reference / "report.json").read_text())["partitions"]
    assert not (out / "store.lock").exists()
    # The writer clears the temporaries of dead writers of this store (directories and lock drafts).
    leftovers = [entry for entry in os.listdir(out) if entry.startswith(".store.")]
    assert leftovers == [], f"the completed run did not clear {leftovers}"


def test_killed_fresh_run_leaves_no_store_and_resume_completes_it(tmp_path):
    corpus, splits = make_corpus(tmp_path)
    reference = tmp_path / "reference"
    run_prepare(corpus, splits, reference)
    out = tmp_path / "out"
    run_prepare(corpus, splits, out, stop_at="chunk:5")  # 40 train documents written: 2 finished files of 16
    assert not (out / "store").exists()
    with pytest.raises(StoreError, match="no token store here"):
        TokenStore.open(out / "store")
    assert_only_temporaries_left(out)
    assert len(list(out.glob(".store.tmp-*/split=train/part-*.parquet"))) >= 2
    run_prepare(corpus, splits, out, resume=True)
    assert_complete_like(out, reference)


@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
def test_sigkill_at_every_stage_leaves_the_previous_store_or_none(tmp_path, resume):
    corpus, splits = make_corpus(tmp_path)
    reference = tmp_path / "reference"
    run_prepare(corpus, splits, reference)
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    previous = snapshot(out / "store")
    assert json.loads((out / "report.json").read_text())["partitions"]["train"]["documents"] == DOCUMENTS * 8 // 10

    for stop_at in KILL_POINTS:
        pid = run_prepare(corpus, splits, out, stop_at=stop_at, resume=resume)
        assert_only_temporaries_left(out)
        if stop_at == "swap:1":  # between the two renames: the old store moved aside, the new one not in place
            assert not (out / "store").exists()
        else:
            assert_same_store(out / "store", previous)
        lock = out / "store.lock"
        if stop_at.split(":")[0] in {"read", "fitted", "outputs", "stored"}:
            assert not lock.exists()  # the writer holds the lock from after fitting until the store is in place
        else:
            assert lock.read_text().strip() == str(pid)  # stale: its writer is dead
    run_prepare(corpus, splits, out, resume=resume)
    assert_complete_like(out, reference)


@pytest.mark.parametrize("stop_at", ["outputs:1", "outputs:2"])
def test_a_run_killed_between_its_output_renames_is_told_apart_from_a_complete_one(tmp_path, stop_at):
    """The store is renamed into place, then tokenizer.json, then report.json: killed in between, OUT
    holds a new store beside the previous run's report (and tokenizer), which every reader refuses."""
    from tests.helpers import run

    corpus, splits = make_corpus(tmp_path)
    out = tmp_path / "out"
    run_prepare(corpus, splits, out, tokenizer="char")
    TokenStore.open(out)
    run_prepare(corpus, splits, out, tokenizer="word", stop_at=stop_at)  # another tokenizer: another hash
    assert_only_temporaries_left(out)
    stale = "tokenizer.json" if stop_at == "outputs:1" else "report.json"
    with pytest.raises(StoreError, match="was interrupted between its renames; run it again"):
        TokenStore.open(out)
    result = run("inspect", out)
    assert result.exit_code == 2 and "interrupted between its renames" in result.output, result.output
    assert (stale in result.output) or ("report.json" in result.output)
    TokenStore.open(out / "store")  # the store itself is complete: opened by its own path it is served
    run_prepare(corpus, splits, out, tokenizer="word")
    store = TokenStore.open(out)
    assert json.loads((out / "tokenizer.json").read_text())["hash"] == store.tokenizer_hash


def _epoch_written(tmp_path, seed: str) -> tuple:
    """A prepared store and one ``batches --out`` epoch of it: ``(epoch folder, the batches command)``."""
    corpus, splits = make_corpus(tmp_path)
    out = tmp_path / "out"
    run_prepare(corpus, splits, out)
    epoch = tmp_path / "epoch"
    command = [sys.executable, "-m", "engine", "batches", str(out), "--context", "16", "--batch-size", "8", "--out",
               str(epoch)]
    subprocess.run(command + ["--seed", seed], check=True, capture_output=True)
    return epoch, command


@pytest.mark.parametrize("stop_at", ["epoch-index:1", "epoch-manifest:1"])
def test_a_killed_batches_out_leaves_the_earlier_epoch_and_does_not_block_the_next(tmp_path, stop_at):
    epoch, command = _epoch_written(tmp_path, "1")
    before = subprocess.run([sys.executable, "-m", "engine", "batches", "show", str(epoch), "--batch", "0", "--json"],
                            check=True, capture_output=True, text=True).stdout
    env = {**os.environ, STOP_AT_VARIABLE: stop_at}
    killed = subprocess.run(command + ["--seed", "2"], env=env, capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    shown = subprocess.run([sys.executable, "-m", "engine", "batches", "show", str(epoch), "--batch", "0", "--json"],
                           capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == before  # the earlier epoch, whole: its manifest and the index it names
    assert any(".tmp-" in p.name for p in epoch.iterdir()) == (stop_at == "epoch-index:1")
    subprocess.run(command + ["--seed", "2"], check=True, capture_output=True)  # the dead run's leftovers are ours
    names = sorted(p.name for p in epoch.iterdir())
    assert len(names) == 2 and names[1] == "manifest.json" and names[0].startswith("index-"), names


@pytest.mark.parametrize("name, content", [(".index.parquet.tmp-99999999", b"mine"),
                                           (".manifest.json.tmp-99999999", b'{"my": "notes"}'),
                                           ("index-0000000000000000.parquet", b"mine"),
                                           ("manifest.json", b'{"format": "my.notes"}\n')])
def test_batches_out_never_removes_a_users_file_named_like_its_own(tmp_path, name, content):
    """Only what ``batches --out`` can prove it wrote is removed: a temporary of a dead run holding what a
    run writes there (the Parquet magic, the manifest's first bytes, or nothing yet), an index file whose
    sha256 starts with its name, a manifest that begins as it writes one. A user's file under such a name
    is refused by name and kept."""
    epoch, command = _epoch_written(tmp_path, "1")
    (epoch / name).write_bytes(content)
    refused = subprocess.run(command + ["--seed", "3"], capture_output=True, text=True)
    assert refused.returncode == 2 and name in refused.stderr, refused.stderr
    assert (epoch / name).read_bytes() == content
    (epoch / name).unlink()
    for leftover, held in ((".index.parquet.tmp-99999999", b"PAR1\x15\x04"), (".manifest.json.tmp-99999999", b"")):
        (epoch / leftover).write_bytes(held)  # a dead run's, cut short: removed
    subprocess.run(command + ["--seed", "3"], check=True, capture_output=True)
    names = sorted(p.name for p in epoch.iterdir())
    assert len(names) == 2 and names[1] == "manifest.json" and names[0].startswith("index-"), names


def test_a_run_killed_inside_a_long_document_resumes(tmp_path):
    """Killed while a long document's ids file is still beside its store file: the dead writer's
    temporary holds ``.long-N.u32``, which is a store writer's own file (the temporary was refused as
    foreign, so neither ``--resume`` nor a new run could go on)."""
    corpus, splits = make_corpus(tmp_path)
    lines = corpus.read_text(encoding="utf-8").splitlines()
    lines[0] = json.dumps({"id": "doc-0", "text": " ".join(["the long document"] * 400)})  # 6.8 kB, train
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    reference = tmp_path / "reference"
    run_prepare(corpus, splits, reference, script=LONG_RUN)
    out = tmp_path / "out"
    run_prepare(corpus, splits, out, stop_at="file:1", script=LONG_RUN)
    assert list(out.glob(".store.tmp-*/.long-*.u32")), "the kill came after the ids file was removed"
    run_prepare(corpus, splits, out, resume=True, script=LONG_RUN)
    assert_complete_like(out, reference)
