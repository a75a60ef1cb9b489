"""Every JSON file engine reads goes through one parser with limits: nesting thousands of levels deep,
integers of thousands of digits and non-numbers are exit 2 with the file named, never RecursionError or
ValueError (exit 1)."""

import json

import pytest

from engine.checks import JSON_MAX_DEPTH, JSONLimitError, parse_json
from engine.errors import EngineError
from engine.store import TokenStore
from engine.tokenizers import load_tokenizer
from tests.helpers import run, small_store

DEEP = "[" * 5000 + "]" * 5000
HUGE_INT = "7" * 5000


def test_parse_json_within_limits_equals_json_loads():
    text = '{"a": [1, -2, 3.5, {"b": [true, null, "x"]}], "c": 12345678901234567890}'
    assert parse_json(text) == json.loads(text)
    assert parse_json("[" * JSON_MAX_DEPTH + "]" * JSON_MAX_DEPTH) == json.loads("[" * JSON_MAX_DEPTH + "]" * JSON_MAX_DEPTH)


@pytest.mark.parametrize("text, message", [
    (DEEP, "nested more than 64 levels deep"),
    ("[" * 65 + "]" * 65, "nested more than 64 levels deep"),  # below the C parser's own recursion limit
    (HUGE_INT, "an integer of 5000 digits"),
    ('{"id": -' + HUGE_INT + "}", "an integer of 5000 digits"),
    ("[NaN]", "NaN"), ("[Infinity]", "Infinity"), ("1e999", "too large for a float"),
])
def test_parse_json_refuses_past_its_limits(text, message):
    with pytest.raises(JSONLimitError, match=message):
        parse_json(text)


@pytest.fixture
def store_path(tmp_path):
    small_store(tmp_path / "s")
    return tmp_path / "s"


@pytest.mark.parametrize("payload", [DEEP, '{"format_version": ' + HUGE_INT + "}"])
def test_store_manifest_past_limits_is_exit_2(store_path, payload):
    (store_path / "_engine.json").write_text(payload, encoding="utf-8")
    with pytest.raises(EngineError, match="_engine.json: .*JSON past engine's limits"):
        TokenStore.open(store_path)
    result = run("inspect", store_path, "--verify")
    assert result.exit_code == 2, result.output
    assert "_engine.json" in result.output and "limits" in result.output


@pytest.mark.parametrize("payload", [DEEP, '{"kind": "char", "payload": {"bos_id": ' + HUGE_INT + "}}"])
def test_tokenizer_file_past_limits_is_exit_2(tmp_path, payload):
    path = tmp_path / "tokenizer.json"
    path.write_text(payload, encoding="utf-8")
    with pytest.raises(EngineError, match="tokenizer.json: .*limits"):
        load_tokenizer(path)
    result = run("tokenizers", "import", path, "--out", tmp_path / "imported.json")
    assert result.exit_code == 2, result.output
    assert "limits" in result.output


def test_epoch_manifest_past_limits_is_exit_2(store_path, tmp_path):
    out = tmp_path / "epoch"
    assert run("batches", store_path, "--context", 2, "--batch-size", 3, "--seed", 7, "--out", out).exit_code == 0
    (out / "manifest.json").write_text(DEEP, encoding="utf-8")
    result = run("batches", "show", out, "--batch", 0)
    assert result.exit_code == 2, result.output
    assert "manifest.json" in result.output and "limits" in result.output
