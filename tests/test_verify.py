"""``TokenStore.verify`` / ``engine inspect --verify`` check everything the manifest claims:
file hashes, document and token counts, the saved tokenizer's hash, and no unlisted files."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Partition
from engine.errors import StoreError
from engine.store import EncodedDocument, TokenStore
from tests.fakes import ByteIdsTokenizer

TOK = ByteIdsTokenizer()


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "store"
    TokenStore.write(path, {
        "train": [EncodedDocument(f"t{i}", Partition.TRAIN, TOK.encode_document("x" * i)) for i in range(5)],
        "validation": [EncodedDocument("v", Partition.VALIDATION, TOK.encode_document("hello"))],
    }, TOK)
    return path


def edit_manifest(path, edit):
    manifest_path = path / "_engine.json"
    manifest = json.loads(manifest_path.read_text())
    edit(manifest)
    manifest_path.write_text(json.dumps(manifest, indent=2))


def inspect_verify(path):
    return CliRunner().invoke(main, ["inspect", str(path), "--verify"])


def test_intact_store_verifies(store_path):
    TokenStore.open(store_path).verify()
    assert inspect_verify(store_path).exit_code == 0


def test_document_count_is_checked(store_path):
    edit_manifest(store_path, lambda m: m["splits"]["train"].__setitem__("documents", 4))
    # The manifest's own rows already disagree with the count: opening refuses it, before any file is read.
    message = f"{store_path / '_engine.json'}: split train records 4 documents, its files list 5 rows; " \
              "the manifest is not consistent"
    with pytest.raises(StoreError, match=re.escape(message)):
        TokenStore.open(store_path)
    result = inspect_verify(store_path)
    assert result.exit_code == 2
    assert result.output == f"error: {message}\n"


def test_token_count_is_checked(store_path):
    train_tokens = sum(i + 2 for i in range(5))  # 20
    edit_manifest(store_path, lambda m: m["splits"]["train"].__setitem__("tokens", train_tokens + 1))
    with pytest.raises(StoreError, match=f"split train: the manifest records {train_tokens + 1} tokens, "
                                         f"its files hold {train_tokens}"):
        TokenStore.open(store_path).verify()
    assert inspect_verify(store_path).exit_code == 2


def test_tokenizer_file_hash_is_checked(store_path):
    tokenizer_file = store_path / "_tokenizer.json"
    ByteIdsTokenizer(salt="other").save(tokenizer_file)  # a valid tokenizer file, but not the store's
    with pytest.raises(StoreError, match=f"_tokenizer.json: holds a tokenizer with hash {ByteIdsTokenizer('other').hash}, "
                                         f"the manifest expects {TOK.hash}"):
        TokenStore.open(store_path).verify()
    tokenizer_file.write_text(tokenizer_file.read_text()[:-5])
    with pytest.raises(StoreError, match="_tokenizer.json: not a readable tokenizer file"):
        TokenStore.open(store_path).verify()
    tokenizer_file.unlink()
    with pytest.raises(StoreError, match="_tokenizer.json: missing"):
        TokenStore.open(store_path).verify()
    result = inspect_verify(store_path)
    assert result.exit_code == 2 and "_tokenizer.json: missing" in result.output


def test_edited_tokenizer_payload_is_caught_even_with_its_recorded_hash(store_path):
    tokenizer_file = store_path / "_tokenizer.json"
    data = json.loads(tokenizer_file.read_text())
    data["payload"]["salt"] = "edited"  # "hash" still says the store's hash; the content does not
    tokenizer_file.write_text(json.dumps(data))
    with pytest.raises(StoreError, match="_tokenizer.json: holds a tokenizer with hash"):
        TokenStore.open(store_path).verify()


@pytest.mark.parametrize("name", ["part-00001.parquet", "stray.txt", ".hidden"])
def test_unlisted_files_in_split_folders_are_flagged(store_path, name):
    shutil.copy(store_path / "split=train" / "part-00000.parquet", store_path / "split=train" / name)
    with pytest.raises(StoreError, match=f"split=train/{name}: not listed in the manifest"):
        TokenStore.open(store_path).verify()
    result = inspect_verify(store_path)
    assert result.exit_code == 2 and "not listed in the manifest" in result.output
    assert CliRunner().invoke(main, ["inspect", str(store_path)]).exit_code == 0  # only --verify reads folders


def test_unlisted_folder_in_a_split_folder_is_flagged(store_path):
    (store_path / "split=test" / "extra").mkdir()
    with pytest.raises(StoreError, match="split=test/extra: not listed in the manifest"):
        TokenStore.open(store_path).verify()
