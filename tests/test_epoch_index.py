"""A saved epoch index names the exact store it was built from, and refuses edited manifests cleanly."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Partition
from engine.errors import BatchError
from engine.store import TokenStore
from tests.test_batches_cli import DecimalIdsTokenizer, encoded, write_store


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def epoch(tmp_path):
    store = tmp_path / "store"
    write_store(store)
    out = tmp_path / "epoch"
    result = run("batches", store, "--context", 2, "--batch-size", 3, "--seed", 7, "--out", out)
    assert result.exit_code == 0, result.output
    return store, out


def edit_manifest(out, edit):
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def test_manifest_records_the_store_manifest_digest(epoch):
    store, out = epoch
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["version"] == 2
    assert manifest["store_manifest_sha256"] == hashlib.sha256((store / "_engine.json").read_bytes()).hexdigest()


def test_show_refuses_a_store_rewritten_with_changed_text(epoch):
    store, out = epoch
    # Same tokenizer, same ids, same document count, same lengths: only the token values differ.
    TokenStore.write(store, {
        Partition.TRAIN: [encoded("train-a", [0, 10, 11, 99, 1]), encoded("train-b", [0, 20, 21, 1])],
        Partition.VALIDATION: [encoded("valid-a", [0, 61, 62, 63, 1], Partition.VALIDATION)],
        Partition.TEST: [],
    }, DecimalIdsTokenizer())
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 2, result.output
    digest = hashlib.sha256((store / "_engine.json").read_bytes()).hexdigest()
    assert result.output.strip().splitlines() == [
        f"error: {store.resolve()}: the store's manifest hashes to {digest}, but the epoch index "
        f"{out / 'manifest.json'} was built from the store whose manifest hashes to "
        f"{json.loads((out / 'manifest.json').read_text())['store_manifest_sha256']}; "
        "the store was rewritten: build the epoch again"]


@pytest.mark.parametrize("field, value, fragment", [
    ("batch_size", "2", '"batch_size" is str \'2\', expected an integer >= 1'),
    ("batch_size", 0, '"batch_size" is 0, expected an integer >= 1'),
    ("batch_size", -3, '"batch_size" is -3, expected an integer >= 1'),
    ("batch_size", True, '"batch_size" is bool True, expected an integer >= 1'),
    ("batch_count", 5, '"batch_count" is 5, but 5 windows in batches of 3 make 2'),
    ("context_length", None, '"context_length" is NoneType None, expected an integer >= 1'),
    ("split", "dev", "\"split\" is 'dev', expected one of train, validation, test"),
    ("store", 7, '"store" is int 7, expected a path string'),
    ("tokenizer_hash", "", '"tokenizer_hash" is str \'\', expected a hash string'),
    ("store_manifest_sha256", None, '"store_manifest_sha256" is NoneType None, expected a sha256 hex string'),
    ("index", None, '"index" is missing or not an object {"file", "sha256"}'),
    ("index", {"file": "../x", "sha256": "0"}, '"index.file" is \'../x\', expected a file name in the epoch directory'),
])
def test_edited_manifest_is_exit_2_with_a_message(epoch, field, value, fragment):
    _, out = epoch
    edit_manifest(out, lambda m: m.__setitem__(field, value))
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {out / 'manifest.json'}: ") and fragment in lines[0]


def test_missing_seed_is_exit_2(epoch):
    _, out = epoch
    edit_manifest(out, lambda m: m.pop("seed"))
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 2
    assert result.output == (f'error: {out / "manifest.json"}: "seed" is missing '
                             '(expected an integer, or null for a sequential epoch)\n')


def test_missing_index_entry_is_exit_2(epoch):
    _, out = epoch
    edit_manifest(out, lambda m: m.pop("index"))
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 2
    assert '"index" is missing or not an object {"file", "sha256"}' in result.output
    assert "Traceback" not in result.output


def test_manifest_of_an_earlier_version_is_refused(epoch):
    _, out = epoch
    edit_manifest(out, lambda m: m.__setitem__("version", 1))
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 2
    assert "manifest version 1, expected 2 (it does not name the exact store; rebuild it" in result.output


def test_document_ids_with_control_characters_are_escaped(tmp_path):
    store = tmp_path / "store"
    TokenStore.write(store, {
        Partition.TRAIN: [encoded("line\nbreak", [0, 10, 11, 1]), encoded("tab\there\x1b", [0, 20, 21, 1])],
        Partition.VALIDATION: [], Partition.TEST: [],
    }, DecimalIdsTokenizer())
    out = tmp_path / "epoch"
    assert run("batches", store, "--context", 2, "--batch-size", 4, "--sequential", "--out", out).exit_code == 0
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1:] == [
        "row 0: 'line\\nbreak' (document 0) @ 0", "  input  [0, 10]", "  target [10, 11]",
        "row 1: 'line\\nbreak' (document 0) @ 1", "  input  [10, 11]", "  target [11, 1]",
        "row 2: 'tab\\there\\x1b' (document 1) @ 0", "  input  [0, 20]", "  target [20, 21]",
        "row 3: 'tab\\there\\x1b' (document 1) @ 1", "  input  [20, 21]", "  target [21, 1]",
    ]
    as_json = json.loads(run("batches", "show", out, "--batch", 0, "--json").output)
    assert [r["document_id"] for r in as_json["rows"]] == ["line\nbreak"] * 2 + ["tab\there\x1b"] * 2
    np.testing.assert_array_equal([r["start"] for r in as_json["rows"]], [0, 1, 0, 1])


def test_error_lines_escape_control_characters_from_the_manifest(epoch):
    _, out = epoch
    edit_manifest(out, lambda m: m.__setitem__("store", "/no/such\nstore"))
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 2
    assert result.output.splitlines() == ["error: /no/such\\nstore: no token store here (directory not found)"]
    edit_manifest(out, lambda m: m.__setitem__("store_manifest_sha256", "0" * 63 + "\x0c"))
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 2 and len(result.output.splitlines()) == 1
    assert '"store_manifest_sha256" is str \'' in result.output and "expected a sha256 hex string" in result.output


def test_library_save_and_load_match_the_command(tmp_path, epoch):
    from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
    from engine.epoch_index import load_epoch_index, save_epoch_index
    from engine.windows import CausalWindowConfig

    store_path, command_out = epoch
    store = TokenStore.open(store_path)
    built = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(2, 1),
                                 batches=MiniBatchConfig(3, BatchOrder.shuffled(7)))
    written = save_epoch_index(built, tmp_path / "lib", store=store)
    assert written["index_sha256"] == hashlib.sha256(Path(written["index"]).read_bytes()).hexdigest()
    assert json.loads((tmp_path / "lib" / "manifest.json").read_text()) == json.loads(
        (command_out / "manifest.json").read_text())
    index = load_epoch_index(tmp_path / "lib")
    reopened = index.open_store()
    for k in range(built.batch_count):
        rows = index.batch(k, reopened)["rows"]
        batch = built.batch(k)
        assert [r["input"] for r in rows] == batch.inputs.tolist()
        assert [r["target"] for r in rows] == batch.targets.tolist()
    with pytest.raises(BatchError, match=f"batch {built.batch_count} is out of range"):
        index.check_batch(built.batch_count)
