"""``engine batches``: build, audit, write the descriptor index and show a batch from it."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Partition
from engine.store import EncodedDocument
from engine.tokenizers.base import Tokenizer, register_tokenizer

from engine.store import TokenStore  # noqa: E402


@register_tokenizer
class DecimalIdsTokenizer(Tokenizer):
    """Test tokenizer: a text of space-separated decimal ids; ``salt`` only changes the hash."""

    kind = "test-decimal-ids"

    def __init__(self, salt: str = "") -> None:
        self.salt = salt

    def _encode(self, text, document_id):
        return np.array([int(piece) for piece in text.split()], dtype=np.uint32)

    def decode(self, ids):
        return " ".join(str(int(i)) for i in ids if int(i) > 1)

    def tokenize(self, text):
        return text.split()

    @property
    def vocab_size(self):
        return 2**16

    def _payload(self):
        return {"salt": self.salt}

    @classmethod
    def _from_payload(cls, payload):
        return cls(payload["salt"])


def encoded(doc_id, tokens, partition=Partition.TRAIN):
    return EncodedDocument(doc_id, partition, np.array(tokens, dtype=np.uint32))


def write_store(path, salt=""):
    return TokenStore.write(
        path,
        {
            Partition.TRAIN: [encoded("train-a", [0, 10, 11, 12, 1]), encoded("train-b", [0, 20, 21, 1])],
            Partition.VALIDATION: [encoded("valid-a", [0, 61, 62, 63, 1], Partition.VALIDATION)],
            Partition.TEST: [],
        },
        DecimalIdsTokenizer(salt),
    )


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "store"
    write_store(path)
    return path


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_build_prints_counts_shapes_and_audit(store_path):
    result = run("batches", store_path, "--split", "train", "--context", 2, "--stride", 1, "--batch-size", 3,
                 "--seed", 7, "--audit")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "split        train: 2 documents, 9 tokens" in out
    assert "windows      5 (T=2, S=1)" in out
    assert "batches      2 of up to 3 rows (shuffled, seed 7)" in out
    assert "first batch  [3, 2]" in out and "last batch   [2, 2]" in out
    assert "audit        ok: coverage 5/5, duplicates 0" in out


def test_build_json_and_explicit_subcommand(store_path):
    result = run("batches", "build", store_path, "--context", 3, "--batch-size", 2, "--sequential", "--json",
                 "--split", "validation", "--audit")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["window_count"] == 2 and report["batch_count"] == 1 and report["order"] == "sequential"
    assert report["first_batch_shape"] == report["last_batch_shape"] == [2, 3]
    assert report["seed"] is None and report["audit"]["ok"] is True
    assert report["tokenizer_hash"] == DecimalIdsTokenizer().hash


def test_out_writes_index_and_manifest_then_show_rebuilds_rows(store_path, tmp_path):
    out_dir = tmp_path / "epoch"
    result = run("batches", store_path, "--context", 2, "--batch-size", 3, "--seed", 7, "--out", out_dir)
    assert result.exit_code == 0, result.output
    index_file = out_dir / json.loads((out_dir / "manifest.json").read_text())["index"]["file"]
    table = pq.read_table(index_file)
    assert table.schema.field("document_index").type == "int64" and table.schema.field("start").type == "int64"
    assert table.column("document_index").to_pylist() == [1, 0, 1, 0, 0]
    assert table.column("start").to_pylist() == [1, 1, 0, 0, 2]
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert (manifest["seed"], manifest["context_length"], manifest["stride"], manifest["batch_size"]) == (7, 2, 1, 3)
    assert (manifest["window_count"], manifest["batch_count"]) == (5, 2)
    assert manifest["tokenizer_hash"] == DecimalIdsTokenizer().hash
    assert manifest["store"] == str(store_path.resolve())
    import hashlib

    assert manifest["index"]["sha256"] == hashlib.sha256(index_file.read_bytes()).hexdigest()

    shown = run("batches", "show", out_dir, "--batch", 1)
    assert shown.exit_code == 0, shown.output
    assert "batch 1 of 2: shape [2, 2], 4 target tokens" in shown.output
    assert "row 0: train-a (document 0) @ 0\n  input  [0, 10]\n  target [10, 11]" in shown.output
    assert "row 1: train-a (document 0) @ 2\n  input  [11, 12]\n  target [12, 1]" in shown.output

    as_json = json.loads(run("batches", "show", out_dir, "--batch", 0, "--json").output)
    assert as_json["shape"] == [3, 2]
    assert [(r["document_id"], r["start"], r["input"], r["target"]) for r in as_json["rows"]] == [
        ("train-b", 1, [20, 21], [21, 1]),
        ("train-a", 1, [10, 11], [11, 12]),
        ("train-b", 0, [0, 20], [20, 21]),
    ]


def test_show_errors(store_path, tmp_path):
    out_dir = tmp_path / "epoch"
    assert run("batches", store_path, "--context", 2, "--batch-size", 3, "--out", out_dir).exit_code == 0
    result = run("batches", "show", out_dir, "--batch", 2)
    assert result.exit_code == 2 and "batch 2 is out of range: this epoch has 2 batches" in result.output

    write_store(store_path, salt="other")  # same path, another tokenizer
    result = run("batches", "show", out_dir, "--batch", 0)
    assert result.exit_code == 2 and "tokenizer hash" in result.output

    (out_dir / json.loads((out_dir / "manifest.json").read_text())["index"]["file"]).write_bytes(b"tampered")
    result = run("batches", "show", out_dir, "--batch", 0)
    assert result.exit_code == 2 and "sha256" in result.output

    result = run("batches", "show", tmp_path / "nowhere", "--batch", 0)
    assert result.exit_code == 2 and "manifest.json: not found" in result.output


def test_build_errors(store_path, tmp_path):
    result = run("batches", store_path, "--context", 2, "--batch-size", 3, "--seed", 1, "--sequential")
    assert result.exit_code == 2 and "--seed and --sequential conflict" in result.output
    result = run("batches", store_path, "--context", 0, "--batch-size", 3)
    assert result.exit_code == 2 and "context length" in result.output
    result = run("batches", store_path, "--context", 2, "--batch-size", 0)
    assert result.exit_code == 2 and "batch size" in result.output
    result = run("batches", tmp_path / "missing", "--context", 2, "--batch-size", 3)
    assert result.exit_code == 2 and "error:" in result.output


def test_empty_split_has_no_batches(store_path):
    result = run("batches", store_path, "--split", "test", "--context", 2, "--batch-size", 3, "--audit")
    assert result.exit_code == 0, result.output
    assert "windows      0" in result.output and "first batch  -" in result.output


def test_help_has_examples():
    for args in (["batches", "--help"], ["batches", "build", "--help"], ["batches", "show", "--help"]):
        result = run(*args)
        assert result.exit_code == 0 and "Example:" in result.output


def test_epoch_from_store_equals_epoch_from_documents(store_path):
    from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
    from engine.windows import CausalWindowConfig

    store = TokenStore.open(store_path)
    options = dict(windows=CausalWindowConfig(2), batches=MiniBatchConfig(3, BatchOrder.shuffled(7)))
    from_store = MiniBatchEpoch.build(store, "train", **options)
    from_list = MiniBatchEpoch.build(list(store.documents("train")), "train", **options)
    assert np.array_equal(from_store.positions, from_list.positions)
    values, _ = store.arrays("train")
    assert np.shares_memory(from_store.values, values)  # zero-copy from the store
    for a, b in zip(from_store, from_list):
        assert np.array_equal(a.inputs, b.inputs) and a.provenance == b.provenance
    assert [f"{p.document_id}@{p.start}" for b in from_store for p in b.provenance] == [
        "train-b@1", "train-a@1", "train-b@0", "train-a@0", "train-a@2"]
