"""engine.tokenizers.interop, reading files (no peer library needed): ids read from tokenizer.json and
tiktoken rank files are checked (range, type, duplicates) before anything is sized by them, and every
malformed tokenizer.json is a TokenizerError (CLI: exit 2, one line)."""

from __future__ import annotations

import base64
import json
import re
import time

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.errors import TokenizerError
from engine.tokenizers.byte_bpe import bytes_to_unicode
from engine.tokenizers.interop import load_hf_tokenizer_json, load_tiktoken

TABLE = bytes_to_unicode()


def hf_data() -> dict:
    """A minimal byte-level tokenizer.json: the 256 bytes (ids 0..255), one merge, <|endoftext|> = 257."""
    vocab = {TABLE[b]: b for b in range(256)}
    vocab[TABLE[ord("a")] + TABLE[ord("b")]] = 256
    return {
        "version": "1.0",
        "added_tokens": [{"id": 257, "content": "<|endoftext|>", "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "model": {"type": "BPE", "vocab": vocab, "merges": ["a b"]},
    }


def write_hf(tmp_path, data) -> str:
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def rank_lines(extra: str = "") -> str:
    return "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)) + extra


def test_minimal_hf_file_loads(tmp_path):
    tok = load_hf_tokenizer_json(write_hf(tmp_path, hf_data()))
    assert tok.vocab_size == 258 and tok.bos_id == tok.eos_id == 257
    assert tok.encode("abc").tolist() == [256, ord("c")]


@pytest.mark.parametrize("value, fragment", [
    (-1, "id -1 is outside 0..16777215"),
    (1_500_000_000, "id 1500000000 is outside 0..16777215"),
    (2**32, "id 4294967296 is outside 0..16777215"),
    ("5", "id '5' is str, expected an integer"),
    (True, "id True is bool, expected an integer"),
    (2.5, "id 2.5 is float, expected an integer"),
])
def test_hf_vocab_ids_are_checked(tmp_path, value, fragment):
    data = hf_data()
    data["model"]["vocab"][TABLE[ord("a")] + TABLE[ord("b")]] = value
    started = time.monotonic()
    with pytest.raises(TokenizerError, match=f"vocab token 'ab': {fragment}"):
        load_hf_tokenizer_json(write_hf(tmp_path, data))
    assert time.monotonic() - started < 5


def test_hf_vocab_minus_one_no_longer_overwrites_the_last_token(tmp_path):
    data = hf_data()
    data["model"]["vocab"]["ĠX"] = -1
    with pytest.raises(TokenizerError, match=r"vocab token 'ĠX': id -1 is outside"):
        load_hf_tokenizer_json(write_hf(tmp_path, data))


def test_hf_duplicate_vocab_ids_are_refused(tmp_path):
    data = hf_data()
    data["model"]["vocab"]["ĠX"] = 7
    with pytest.raises(TokenizerError, match="vocab tokens 'ć' and 'ĠX' share id 7"):
        load_hf_tokenizer_json(write_hf(tmp_path, data))


@pytest.mark.parametrize("value", [1_500_000_000, 2**32, -3])
def test_hf_special_ids_are_checked_quickly(tmp_path, value):
    data = hf_data()
    data["added_tokens"][0]["id"] = value
    started = time.monotonic()
    with pytest.raises(TokenizerError, match=f"added token '<\\|endoftext\\|>': id {value} is outside 0..16777215"):
        load_hf_tokenizer_json(write_hf(tmp_path, data))
    assert time.monotonic() - started < 5


def mutate_added(data, how):
    if how == "no id":
        del data["added_tokens"][0]["id"]
    elif how == "dict":
        data["added_tokens"] = {"<|endoftext|>": 257}
    elif how == "string id":
        data["added_tokens"][0]["id"] = "257"
    elif how == "not an object":
        data["added_tokens"] = ["<|endoftext|>"]
    elif how == "no content":
        del data["added_tokens"][0]["content"]
    elif how == "duplicate id":
        data["added_tokens"].append({"id": 257, "content": "<pad>"})
    elif how == "duplicate content":
        data["added_tokens"].append({"id": 258, "content": "<|endoftext|>"})
    elif how == "empty vocab":
        data["model"]["vocab"] = {}
        data["model"]["merges"] = []
    elif how == "string vocab":
        data["model"]["vocab"] = "abc"
    elif how == "normalizer":
        data["normalizer"] = {"type": "NFC"}
    elif how == "string normalizer":
        data["normalizer"] = "NFC"
    elif how == "sequence of strings":
        data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": ["Split", "ByteLevel"]}
    elif how == "sequence not a list":
        data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": {"a": 1}}
    elif how == "split pattern string":
        data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": "x", "behavior": "Isolated"},
            {"type": "ByteLevel", "use_regex": False}]}
    elif how == "split regex list":
        data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": ["x"]}, "behavior": "Isolated"},
            {"type": "ByteLevel", "use_regex": False}]}
    elif how == "merge of lists":
        data["model"]["merges"] = [[["a"], ["b"]]]
    elif how == "top level list":
        return [data]
    return data


BAD_HF = {
    "no id": "added token 0: expected an object with a string \"content\" and an integer \"id\"",
    "dict": "\"added_tokens\" is dict, expected a list of objects",
    "string id": "added token '<|endoftext|>': id '257' is str, expected an integer",
    "not an object": "added token 0: expected an object with a string \"content\" and an integer \"id\"",
    "no content": "added token 0: expected an object with a string \"content\" and an integer \"id\"",
    "duplicate id": "added tokens '<|endoftext|>' and '<pad>' share id 257",
    "duplicate content": "added token '<|endoftext|>' appears twice",
    "empty vocab": "\"vocab\" is empty",
    "string vocab": "model needs a \"vocab\" object and a \"merges\" list",
    "normalizer": "normalizer {\"type\": \"NFC\"} is not supported (expected null)",
    "string normalizer": "normalizer \"NFC\" is not supported (expected null)",
    "sequence of strings": "unsupported pre_tokenizer",
    "sequence not a list": "unsupported pre_tokenizer",
    "split pattern string": "unsupported pre_tokenizer",
    "split regex list": "unsupported pre_tokenizer",
    "merge of lists": "merge 0 [['a'], ['b']]: expected two vocabulary tokens",
    "top level list": "expected a JSON object with a \"model\"",
}


@pytest.mark.parametrize("how", sorted(BAD_HF))
def test_bad_tokenizer_json_is_a_tokenizer_error(tmp_path, how):
    path = write_hf(tmp_path, mutate_added(hf_data(), how))
    with pytest.raises(TokenizerError) as caught:
        load_hf_tokenizer_json(path)
    assert BAD_HF[how] in str(caught.value)
    assert str(caught.value).startswith(path)


@pytest.mark.parametrize("how", ["no id", "dict", "string id", "empty vocab", "string vocab", "sequence of strings"])
def test_cli_import_of_bad_tokenizer_json_exits_2(tmp_path, how):
    path = write_hf(tmp_path, mutate_added(hf_data(), how))
    result = CliRunner().invoke(main, ["tokenizers", "import", path, "--out", str(tmp_path / "out.json")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and BAD_HF[how] in lines[0]
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("rank", [2_000_000_000, 100_000_000_000, 2**32, 1 << 24])
def test_tiktoken_ranks_are_range_checked_quickly(tmp_path, rank):
    path = tmp_path / "r.tiktoken"
    path.write_text(rank_lines(f"{base64.b64encode(b'ab').decode()} {rank}\n"))
    started = time.monotonic()
    with pytest.raises(TokenizerError, match=f"r.tiktoken:257: rank {rank} is outside 0..16777215"):
        load_tiktoken(path)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("specials, fragment", [
    ({"<|endoftext|>": 1_500_000_000}, "special token '<|endoftext|>': id 1500000000 is outside 0..16777215"),
    ({"<|endoftext|>": 2**32}, "special token '<|endoftext|>': id 4294967296 is outside 0..16777215"),
    ({"<a>": 300, "<b>": 300}, "special tokens '<a>' and '<b>' share id 300"),
])
def test_tiktoken_specials_are_checked(tmp_path, specials, fragment):
    path = tmp_path / "r.tiktoken"
    path.write_text(rank_lines())
    with pytest.raises(TokenizerError) as caught:
        load_tiktoken(path, special_tokens=specials, bos="<a>" if "<a>" in specials else None)
    assert fragment in str(caught.value)


def test_cli_tiktoken_special_beyond_bound_exits_2(tmp_path):
    path = tmp_path / "r.tiktoken"
    path.write_text(rank_lines())
    result = CliRunner().invoke(main, ["tokenizers", "import", str(path), "--special", "<|endoftext|>=4294967296",
                                       "--out", str(tmp_path / "o.json")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {path}: special token '<|endoftext|>': id 4294967296 is outside 0..16777215 "
        "(ids are uint32 and a vocabulary holds at most 16777216 ids)"]


def test_a_tokenizer_json_is_parsed_once(tmp_path, monkeypatch):
    """load_tokenizer parses a byte-level tokenizer.json once and hands the parsed data on (the
    pipeline dispatch and the byte-level reader do not read the file again)."""
    import engine.checks
    import engine.tokenizers.hf_pipeline as hf_pipeline
    import engine.tokenizers.interop as interop
    import engine.tokenizers.loading as loading

    calls = []

    def counted(text, **options):
        calls.append(len(text))
        return engine.checks.parse_json(text, **options)

    for module in (loading, hf_pipeline, interop):
        monkeypatch.setattr(module, "parse_json", counted)
    path = write_hf(tmp_path, hf_data())
    tok = loading.load_tokenizer(path)
    assert len(calls) == 1 and calls[0] == len(open(path, encoding="utf-8").read())
    assert tok.kind == "bpe-byte" and tok.vocab_size == 258 and tok.encode("ab").tolist() == [256]
    assert load_hf_tokenizer_json(path, data=json.loads(open(path).read())) == tok == load_hf_tokenizer_json(path)


@pytest.mark.parametrize("bad", [" ", "\n", "\x00", "\u00ad", "\u0144", "\u4e2d", "\udfff", "\U0001f600"])
def test_vocab_characters_map_to_bytes_by_the_byte_level_table(tmp_path, bad):
    """Every token's bytes are its characters through GPT-2's table (all 256 single characters, and
    tokens of several); a character outside the alphabet (below 256 or not) is named."""
    data = hf_data()
    vocab = data["model"]["vocab"]
    several = "".join(TABLE[b] for b in (0, 32, 127, 173, 255, 65))
    vocab[several] = 258
    tok = load_hf_tokenizer_json(write_hf(tmp_path, data))
    assert [tok.tokens[b] for b in range(256)] == [bytes([b]) for b in range(256)]
    assert tok.tokens[256] == b"ab" and tok.tokens[258] == bytes([0, 32, 127, 173, 255, 65])
    assert bad not in TABLE.values()
    vocab[TABLE[ord("x")] + bad] = 259
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(TokenizerError) as caught:
        load_hf_tokenizer_json(tmp_path / "tokenizer.json")
    assert f"(id 259) has character {bad!r} outside the byte-level alphabet" in str(caught.value)


@pytest.mark.parametrize("merge", ["a", "a b c", "a zz", ["a"], ["a", 7], ["a", "zz"], 5, None])
def test_a_merge_that_is_not_two_vocabulary_tokens_is_named(tmp_path, merge):
    data = hf_data()
    data["model"]["merges"] = ["a b", merge]
    with pytest.raises(TokenizerError, match=rf"merge 1 {re.escape(repr(merge))}: expected two vocabulary tokens"):
        load_hf_tokenizer_json(write_hf(tmp_path, data))
