"""A store with role flags (chat and instruction data): the roles column, version 2, verify, views."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pyarrow.parquet as pq
import pytest

from engine.buffers import EncodedDocument
from engine.errors import StoreError
from engine.store import TokenStore
from engine.store.layout import ROLES_FORMAT_VERSION, ROLES_TYPE
from engine.tokenizers.byte_bpe import ByteBpeTokenizer

TOK = ByteBpeTokenizer([bytes([b]) for b in range(256)], specials={"<bos>": 256, "<eos>": 257}, bos="<bos>", eos="<eos>")


def _docs():
    return [EncodedDocument("a", "train", np.array([5, 6, 7], np.uint32), np.array([0, 1, 1], np.uint8)),
            EncodedDocument("b", "train", np.array([8], np.uint32), np.array([1], np.uint8)),
            EncodedDocument("v", "validation", np.array([3, 4], np.uint32), np.array([0, 1], np.uint8))]


def test_roles_round_trip(tmp_path):
    store = TokenStore.write(tmp_path / "s", {"train": _docs()[:2], "validation": _docs()[2:]}, TOK, roles=True,
                             row_group_size=1)
    assert store.has_roles and store.format_version == ROLES_FORMAT_VERSION == 2
    manifest = json.loads((tmp_path / "s" / "_engine.json").read_text())
    assert manifest["roles"] is True and manifest["format_version"] == 2
    table = pq.read_table(tmp_path / "s" / "split=train" / "part-00000.parquet")
    assert table.schema.field("roles").type == ROLES_TYPE
    assert table.schema.metadata[b"engine.format_version"] == b"2"
    docs = store.documents("train")
    assert docs[0].roles.dtype == np.uint8 and docs[0].roles.tolist() == [0, 1, 1] and docs[1].roles.tolist() == [1]
    assert docs[0].tokens.tolist() == [5, 6, 7]  # no BOS/EOS rule for chat documents
    buffers = store.buffers("train")
    assert buffers.roles.tolist() == [0, 1, 1, 1]
    assert store.documents("test")._roles.shape == (0,)
    assert store.verify() == 3
    copy = pickle.loads(pickle.dumps(store))
    assert copy.mapped_file("train") is not None and copy.documents("train")[0].roles.tolist() == [0, 1, 1]


def test_store_without_roles_is_unchanged(tmp_path):
    docs = [EncodedDocument("a", "train", np.array([256, 5, 257], np.uint32))]
    store = TokenStore.write(tmp_path / "s", {"train": docs}, TOK)
    assert not store.has_roles and store.format_version == 1 and store.documents("train")[0].roles is None
    assert store.buffers("train").roles is None and store.roles("train") is None
    assert "roles" not in json.loads((tmp_path / "s" / "_engine.json").read_text())
    assert pq.read_table(tmp_path / "s" / "split=train" / "part-00000.parquet").column_names == ["id", "tokens"]


def test_writer_checks_roles(tmp_path):
    with pytest.raises(StoreError, match="document 'x': role flag 2 at token 1; expected 0 or 1"):
        with TokenStore.writer(tmp_path / "s", TOK, roles=True) as w:
            w.write_chunk("train", ["x"], np.array([1, 2], np.uint32), np.array([0, 2], np.int64),
                          roles=np.array([0, 2], np.uint8))
    with pytest.raises(StoreError, match="roles must be uint8 flags aligned with the tokens"):
        with TokenStore.writer(tmp_path / "s", TOK, roles=True) as w:
            w.write_chunk("train", ["x"], np.array([1, 2], np.uint32), np.array([0, 2], np.int64))
    with pytest.raises(StoreError, match="has no roles, but this store holds one role flag per token"):
        TokenStore.write(tmp_path / "s", {"train": [EncodedDocument("a", "train", np.array([1], np.uint32))]}, TOK,
                         roles=True)
    with pytest.raises(StoreError, match="2 role flags for 3 tokens"):
        TokenStore.write(tmp_path / "s", {"train": [EncodedDocument("a", "train", np.array([1, 2, 3], np.uint32),
                                                                    np.array([0, 1], np.uint8))]}, TOK, roles=True)
    assert not (tmp_path / "s").exists()


def test_verify_and_open_catch_broken_roles(tmp_path):
    import pyarrow as pa

    TokenStore.write(tmp_path / "s", {"train": _docs()[:2]}, TOK, roles=True)
    file = tmp_path / "s" / "split=train" / "part-00000.parquet"
    table = pq.read_table(file)
    bad = table.set_column(2, pa.field("roles", ROLES_TYPE), pa.array([[0, 1], [1]], ROLES_TYPE))
    pq.write_table(bad.replace_schema_metadata(table.schema.metadata), file)
    manifest_file = tmp_path / "s" / "_engine.json"
    manifest = json.loads(manifest_file.read_text())
    entry = manifest["splits"]["train"]["files"][0]
    from engine.store.layout import sha256_file

    entry["bytes"], entry["sha256"] = file.stat().st_size, sha256_file(file)
    manifest_file.write_text(json.dumps(manifest))
    store = TokenStore.open(tmp_path / "s")
    with pytest.raises(StoreError, match="row 0: 2 role flags for 3 tokens; expected one per token"):
        store.verify()
    manifest["roles"] = None
    manifest_file.write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match='format version 2 with "roles": null'):
        TokenStore.open(tmp_path / "s")
