"""``engine inspect STORE``: table and JSON summaries, errors as one line and exit status 2."""

from __future__ import annotations

import json

from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Partition
from engine.store import EncodedDocument, TokenStore
from tests.fakes import ByteIdsTokenizer

TOK = ByteIdsTokenizer()


def make_store(path):
    docs = {
        "train": [EncodedDocument(f"t{i}", Partition.TRAIN, TOK.encode_document("x" * i)) for i in range(1200)],
        "validation": [EncodedDocument("v", Partition.VALIDATION, TOK.encode_document("hello"))],
    }
    return TokenStore.write(path, docs, TOK)


def test_inspect_table(tmp_path):
    make_store(tmp_path / "store")
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    train_tokens = sum(i + 2 for i in range(1200))  # 721,800
    assert result.output.splitlines() == [
        f"store           {tmp_path / 'store'}",
        "format version  1",
        f"tokenizer hash  {TOK.hash}",
        "bos / eos ids   0 / 1",
        "",
        "split          documents          tokens",
        "train              1,200         721,800",
        "validation             1               7",
        "test                   0               0",
        "total              1,201         721,807",
    ]
    assert train_tokens == 721_800


def test_inspect_json_and_verify(tmp_path):
    make_store(tmp_path / "store")
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "store"), "--json", "--verify"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "path": str(tmp_path / "store"),
        "format_version": 1,
        "tokenizer_hash": TOK.hash,
        "bos_id": 0,
        "eos_id": 1,
        "splits": {
            "train": {"documents": 1200, "tokens": 721800},
            "validation": {"documents": 1, "tokens": 7},
            "test": {"documents": 0, "tokens": 0},
        },
        "total": {"documents": 1201, "tokens": 721807},
        "verified": {"files": 3, "ok": True},
    }


def test_inspect_missing_store_is_one_error_line(tmp_path):
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert result.output == f"error: {tmp_path / 'missing'}: no token store here (directory not found)\n"


def test_inspect_verify_reports_a_corrupt_file(tmp_path):
    make_store(tmp_path / "store")
    file = tmp_path / "store" / "split=validation" / "part-00000.parquet"
    data = bytearray(file.read_bytes())
    data[8] ^= 0x01
    file.write_bytes(bytes(data))
    assert CliRunner().invoke(main, ["inspect", str(tmp_path / "store")]).exit_code == 0
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "store"), "--verify"])
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {file}: sha256 is ")


def test_inspect_help_has_an_example():
    result = CliRunner().invoke(main, ["inspect", "--help"])
    assert result.exit_code == 0
    assert "Example:\n    engine inspect out/store\n" in result.output
