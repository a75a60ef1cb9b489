"""Every bad input at a public boundary gets the matching EngineError subclass, with what, where and
what was expected, before any kernel runs; corrupt files are detected; the CLI maps errors to exit codes.

Sections: tokenizers, token store writer, packing and masks, windows/batches ranges, corpus readers,
enormous documents, corrupt files, the writer lock, the CLI.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Corpus, ReadReport, iter_folder, iter_jsonl, iter_parquet, read_text_file
from engine.errors import (
    BatchError,
    ConfigurationError,
    CorpusError,
    PackingError,
    StoreError,
    TokenizerError,
)
from engine.store import EncodedDocument, TokenStore
from engine.tokenizers.base import load_tokenizer
from engine.tokenizers.bpe import BpeTokenizer, BpeTrainer
from engine.tokenizers.char import CharTokenizer
from engine.tokenizers.word import WordTokenizer

TRAIN = "the cat sat on the mat.\nthe dog sat on the log!\x00"


@pytest.fixture(scope="module")
def tokenizers():
    return {
        "char": CharTokenizer.fit(TRAIN),
        "word": WordTokenizer.fit(TRAIN),
        "bpe": BpeTrainer(20).train(TRAIN),
    }


KINDS = ["char", "word", "bpe"]


# -- tokenizers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_decode_id_at_or_above_vocab_size_names_id_and_position(tokenizers, kind):
    tok = tokenizers[kind]
    v = tok.vocab_size
    with pytest.raises(TokenizerError) as err:
        tok.decode([2, 3, v])
    assert str(err.value) == f"{kind} decode: id {v} at position 2 is outside the vocabulary (expected 0..{v - 1})"
    with pytest.raises(TokenizerError, match=f"{kind} decode: id -1 at position 0 is outside the vocabulary"):
        tok.decode(np.array([-1, 2], np.int64))


@pytest.mark.parametrize("kind", KINDS)
def test_decode_huge_ids_are_reported_as_themselves_not_wrapped(tokenizers, kind):
    tok = tokenizers[kind]
    with pytest.raises(TokenizerError, match=f"id {2**63 + 5} at position 1 is outside"):
        tok.decode(np.array([2, 2**63 + 5], np.uint64))
    with pytest.raises(TokenizerError, match=f"id {2**64} at position 0 is outside"):
        tok.decode([2**64])
    with pytest.raises(TokenizerError, match="expected integer ids, got dtype float64"):
        tok.decode([2.0])
    with pytest.raises(TokenizerError, match=r"expected a 1-d sequence of ids, got shape \(1, 1\)"):
        tok.decode([[2]])
    assert tok.decode([]) == ""


@pytest.mark.parametrize("kind", KINDS)
def test_non_str_text_is_a_tokenizer_error(tokenizers, kind):
    tok = tokenizers[kind]
    with pytest.raises(TokenizerError) as err:
        tok.encode(b"the cat")
    assert str(err.value) == f"{kind} encode: text is bytes, expected str (decode bytes as UTF-8 first)"
    with pytest.raises(TokenizerError, match=f"{kind} encode: text of document 'd7' is int, expected str"):
        tok.encode_document(7, "d7")
    with pytest.raises(TokenizerError, match=f"{kind} encode: text is NoneType, expected str"):
        tok.tokenize(None)
    with pytest.raises(TokenizerError, match=f"{kind} encode_documents: document 'b' is NoneType, expected str"):
        tok.encode_documents(["the", None], ["a", "b"])
    with pytest.raises(TokenizerError, match=f"{kind} encode_documents: texts is str, expected a list"):
        tok.encode_documents("the cat")
    with pytest.raises(TokenizerError, match=f"{kind} encode_documents: 1 document ids for 2 texts"):
        tok.encode_documents(["the", "cat"], ["a"])


@pytest.mark.parametrize("fit", [CharTokenizer.fit, WordTokenizer.fit, BpeTrainer(3).train])
def test_fitting_on_non_text_is_a_tokenizer_error(fit):
    with pytest.raises(TokenizerError, match="training text 1: expected a str, got bytes"):
        fit(["ok", b"bytes"])
    with pytest.raises(TokenizerError, match="training texts: expected a str or an iterable of str, got NoneType"):
        fit(None)


def test_lone_surrogates_never_enter_a_tokenizer():
    with pytest.raises(TokenizerError, match=r"holds a lone surrogate U\+D800 at character offset 1"):
        CharTokenizer.fit("a\ud800")
    with pytest.raises(TokenizerError, match=r"lone surrogate U\+DC00"):
        WordTokenizer.fit("x \udc00")
    with pytest.raises(TokenizerError, match=r"lone surrogate U\+D800"):
        BpeTrainer(2).train("a\ud800b")


def test_constructors_reject_malformed_arguments():
    with pytest.raises(TokenizerError, match="char tokenizer: alphabet is int, expected a str"):
        CharTokenizer(5)
    with pytest.raises(TokenizerError, match="word tokenizer: pieces must be a list of str, got str"):
        WordTokenizer("ab")
    with pytest.raises(TokenizerError, match=r"bpe tokenizer: merge 0 is \('a',\), expected a pair of non-empty strings"):
        BpeTokenizer("ab", [("a",)])
    with pytest.raises(TokenizerError, match=r"bpe tokenizer: history entry 0 is \(-1, 3\), expected a pair of integers >= 0"):
        BpeTokenizer("ab", [("a", "b")], [(-1, 3)])


@pytest.mark.parametrize("kind", KINDS)
def test_nul_characters_round_trip_through_every_tokenizer(tokenizers, kind, tmp_path):
    tok = tokenizers[kind]
    text = "the\x00cat sat\x00\x00 on the log!\x00"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    values, offsets = tok.encode_documents([text, "\x00"], ["a", "b"])
    assert tok.decode(values[offsets[1] : offsets[2]]) == "\x00"
    reloaded = load_tokenizer(tok.save(tmp_path / "tok.json"))
    assert reloaded == tok and reloaded.decode(reloaded.encode(text)) == text


def test_nul_round_trips_through_the_byte_level_tokenizer():
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    tok = ByteBpeTrainer(merges=10).train(TRAIN)
    assert tok.decode(tok.encode("a\x00b\x00")) == "a\x00b\x00"


# -- token store writer -----------------------------------------------------------------------------


@pytest.fixture()
def char_tok():
    return CharTokenizer.fit("abc")


def write_chunk(path, tok, ids, values, offsets):
    with TokenStore.writer(path, tok) as writer:
        writer.write_chunk("train", ids, values, offsets)


VALUES = np.array([0, 2, 1, 0, 3, 4, 1, 0, 1], np.uint32)


@pytest.mark.parametrize(
    "ids, offsets, fragment",
    [
        (["a", "b", "c"], [0, 3, 2, 9], "train document 'b': offsets decrease (offsets[1] = 3 > offsets[2] = 2; "
                                        "offsets must rise from 0 to 9 = len(values))"),
        (["a", "b", "c"], [0, 3 * 2**61, -3 * 2**61, 9],
         f"train chunk: offsets[1] = {3 * 2**61} is outside the values buffer; expected 0 <= offset <= 9 (len(values))"),
        (["a", "b"], [0, 2**63 - 1, 9], f"offsets decrease (offsets[1] = {2**63 - 1} > offsets[2] = 9"),
        (["a", "b", "c"], [0, 3, 7, 10], "train chunk: offsets run from 0 to 10, expected 0 to 9 (len(values))"),
    ],
)
def test_store_writer_checks_offsets_before_writing(tmp_path, char_tok, ids, offsets, fragment):
    with pytest.raises(StoreError) as err:
        write_chunk(tmp_path / "s", char_tok, ids, VALUES, np.array(offsets, np.int64))
    assert fragment in str(err.value)
    assert sorted(os.listdir(tmp_path)) == []


def test_store_writer_checks_dtypes_ids_documents_and_options(tmp_path, char_tok):
    offsets = np.array([0, 3, 7, 9], np.int64)
    with pytest.raises(StoreError, match=r"train chunk: offsets must be a 1-D int64 array, got int32 array of shape \(4,\)"):
        write_chunk(tmp_path / "s", char_tok, ["a", "b", "c"], VALUES, offsets.astype(np.int32))
    with pytest.raises(StoreError, match=r"train chunk: tokens must be a 1-D uint32 array, got int64"):
        write_chunk(tmp_path / "s", char_tok, ["a", "b", "c"], VALUES.astype(np.int64), offsets)
    with pytest.raises(StoreError, match="train chunk: ids is str, expected a list of str"):
        write_chunk(tmp_path / "s", char_tok, "abc", VALUES, offsets)
    with pytest.raises(StoreError, match=r"train document 1: id 'b\\ud800' holds a lone surrogate at character offset 1"):
        write_chunk(tmp_path / "s", char_tok, ["a", "b\ud800", "c"], VALUES, offsets)
    with pytest.raises(StoreError, match="train document 1: got int, expected EncodedDocument"):
        with TokenStore.writer(tmp_path / "s", char_tok) as writer:
            writer.write_documents("train", [EncodedDocument("a", "train", VALUES[:3]), 5])
    with pytest.raises(StoreError, match="tokenizer is NoneType, expected an engine Tokenizer"):
        TokenStore.writer(tmp_path / "s", None)
    with pytest.raises(StoreError, match="row_group_size='x': row_group_size, chunk_documents and max_rows_per_file must be >= 1"):
        TokenStore.writer(tmp_path / "s", char_tok, row_group_size="x")
    with pytest.raises(StoreError, match="timeout=-1: expected a number of seconds >= 0"):
        TokenStore.writer(tmp_path / "s", char_tok, timeout=-1)
    with pytest.raises(StoreError, match="encoded_partitions is list, expected a mapping"):
        TokenStore.write(tmp_path / "s", [], char_tok)
    assert sorted(os.listdir(tmp_path)) == []


def test_store_manifest_may_not_point_outside_the_store(tmp_path, char_tok):
    path = tmp_path / "s"
    TokenStore.write(path, {"train": [EncodedDocument("a", "train", VALUES[:3])]}, char_tok)
    manifest = json.loads((path / "_engine.json").read_text())
    manifest["splits"]["train"]["files"][0]["name"] = "../elsewhere.parquet"
    (path / "_engine.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match=r"manifest is malformed \(ValueError: file name '../elsewhere.parquet' leaves the store"):
        TokenStore.open(path)


# -- packing and masks --------------------------------------------------------------------------------

PV = np.array([0, 5, 6, 1, 0, 7, 1], np.uint32)
PO = np.array([0, 4, 7], np.int64)


@pytest.mark.parametrize(
    "row_length, error, fragment",
    [
        (0, ConfigurationError, "row_length=0: expected an integer >= 1"),
        (4.0, ConfigurationError, "row_length=4.0: expected an integer >= 1"),
        (True, ConfigurationError, "row_length=True: expected an integer >= 1"),
        (2**63, ConfigurationError, f"row_length={2**63}: expected at most 2147483647 (position and segment ids are int32)"),
        (2**31, ConfigurationError, "expected at most 2147483647"),
    ],
)
def test_row_length_range(row_length, error, fragment):
    from engine.packing import pack_documents, plan_packing

    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        pack_documents((PV, PO, ["a", "b"]), row_length)
    with pytest.raises(error):
        plan_packing([4, 3], row_length)


def test_packing_inputs_are_checked_before_the_kernels():
    from engine.packing import pack_documents, plan_packing

    with pytest.raises(PackingError, match=r"values: expected 1-D uint32 token ids, got int64 \(7,\)"):
        pack_documents((PV.astype(np.int64), PO, ["a", "b"]), 4)
    with pytest.raises(PackingError, match="offsets: expected to start at 0, never decrease and end at len"):
        pack_documents((PV, np.array([0, 9, 7], np.int64), ["a", "b"]), 4)
    with pytest.raises(PackingError, match="document_lengths: the lengths sum to more than 2\\*\\*63 - 1 tokens"):
        plan_packing([2**62, 2**62], 4)
    with pytest.raises(PackingError, match=f"a length of {2**63 + 1} is too large; expected at most 2\\*\\*63 - 1 - row_length"):
        plan_packing(np.array([2**63 + 1], np.uint64), 4)
    with pytest.raises(PackingError, match="documents\\[1\\] is int; expected an EncodedDocument"):
        pack_documents([EncodedDocument("a", "train", PV[:4]), 3], 4)
    with pytest.raises(PackingError, match="documents is NoneType; expected a list of EncodedDocument"):
        pack_documents(None, 4)
    with pytest.raises(PackingError, match="roles for document 'b' at offset 2: got 2, expected 0 or 1"):
        pack_documents((PV, PO, ["a", "b"]), 4, roles=np.array([1, 1, 1, 1, 0, 0, 2]))


def test_packing_refuses_plans_larger_than_memory(monkeypatch):
    import engine.packing as packing

    monkeypatch.setattr(packing, "_memory_limit", lambda: 10_000)
    with pytest.raises(PackingError, match="the plan needs 12,048 bytes, more than this machine's memory"):
        packing.plan_packing([5], 1000)
    with pytest.raises(PackingError, match="1 rows of 1000 positions need 17,000 bytes"):
        packing.pack_documents((PV, PO, ["a", "b"]), 1000, "sequential")


def test_mask_inputs_and_out_arrays_are_checked():
    from engine import masks

    with pytest.raises(PackingError, match=r"segment_ids: expected a 2-D array \[rows, length\], got shape \(3,\)"):
        masks.attention_mask(np.array([0, 0, 1]), device="cpu")
    with pytest.raises(PackingError, match="segment_ids: expected an integer dtype, got float32"):
        masks.position_ids(np.zeros((1, 2), np.float32), device="cpu")
    with pytest.raises(PackingError, match=r"segment_ids\[0, 1\] = -2: expected -1 \(padding\) or an id >= 0"):
        masks.attention_mask(np.array([[0, -2]]), device="cpu")
    with pytest.raises(PackingError, match=rf"segment_ids\[0, 1\] = {2**63 + 1}: expected an id < 2\*\*31"):
        masks.attention_mask(np.array([[0, 2**63 + 1]], np.uint64), device="cpu")
    with pytest.raises(PackingError, match="segment_ids: expected a 2-D integer array"):
        masks.attention_mask([[0, 0], [0]], device="cpu")
    seg = np.array([[0, 0, -1]])
    for out in (np.empty((1, 3, 4), bool), np.empty((1, 3, 3), np.int8), np.empty((1, 3, 6), bool)[:, :, ::2]):
        with pytest.raises(ConfigurationError, match=r"dense out=: expected a C-contiguous writeable bool array of shape \(1, 3, 3\)"):
            masks.attention_mask(seg, device="cpu", out=out)
    readonly = np.empty((1, 3), np.int32)
    readonly.flags.writeable = False
    with pytest.raises(ConfigurationError, match="position_ids out=: expected a C-contiguous writeable int32"):
        masks.position_ids(seg, device="cpu", out=readonly)
    with pytest.raises(ConfigurationError, match="device='tpu' is not one of"):
        masks.attention_mask(seg, device="tpu")


# -- windows, batches, seeds: ranges near 2^63 and 2^64 --------------------------------------------


def test_context_stride_batch_size_and_seed_ranges():
    from engine.batches import BatchOrder, MiniBatchConfig
    from engine.windows import CausalWindowConfig

    with pytest.raises(ConfigurationError, match="must be positive"):
        CausalWindowConfig(0, 1)
    with pytest.raises(ConfigurationError, match="must be positive"):
        CausalWindowConfig(4, 0)
    with pytest.raises(ConfigurationError, match=r"T \+ 1 must fit in 64 bits"):
        CausalWindowConfig(2**64 - 1, 1)
    assert CausalWindowConfig(2**64 - 2, 1).window_count(2**64 - 1) == 1  # no overflow at the edge
    assert CausalWindowConfig(3, 2**64 - 1).window_count(2**64 - 1) == 1
    assert CausalWindowConfig(2**63, 2**63).window_count(2**64 - 1) == (2**64 - 1 - (2**63 + 1)) // 2**63 + 1
    with pytest.raises(ConfigurationError, match=f"stride S is {2**64}, larger than the largest allowed value"):
        CausalWindowConfig(3, 2**64)
    with pytest.raises(BatchError, match="batch size must be a positive integer, got 0"):
        MiniBatchConfig(0)
    for seed in (-1, 2**64):
        with pytest.raises(ConfigurationError, match=f"seed must be an integer in 0..2\\^64-1, got {seed}"):
            BatchOrder.shuffled(seed)
    assert BatchOrder.shuffled(2**64 - 1).seed == 2**64 - 1


# -- corpus readers --------------------------------------------------------------------------------


def test_invalid_utf8_policy_in_every_reader(tmp_path):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "x\xffy"}\n')
    with pytest.raises(CorpusError) as err:
        list(iter_jsonl(jsonl))
    assert str(err.value) == (
        f"{jsonl}:2: invalid UTF-8 at byte offset 48 (byte 0xff); expected UTF-8 text "
        "(on_invalid_utf8='replace' or 'skip' accepts it)"
    )
    assert [d.text for d in iter_jsonl(jsonl, on_invalid_utf8="replace")] == ["ok", "x\ufffdy"]
    report = ReadReport()
    assert [d.id for d in iter_jsonl(jsonl, on_invalid_utf8="skip", report=report)] == ["a"]
    assert report.skipped_invalid_utf8 == 1

    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.txt").write_text("fine")
    (folder / "sub" / "bad.txt").write_bytes(b"ab\xc3")
    with pytest.raises(CorpusError, match=r"docs/sub/bad.txt: invalid UTF-8 at byte offset 2 \(byte 0xc3\)"):
        list(iter_folder(folder))
    assert [d.text for d in iter_folder(folder, on_invalid_utf8="replace")] == ["fine", "ab\ufffd"]
    assert [d.id for d in iter_folder(folder, on_invalid_utf8="skip")] == ["good.txt"]

    text = tmp_path / "play.txt"
    text.write_bytes(b"to be\x80")
    with pytest.raises(CorpusError, match=r"play.txt: invalid UTF-8 at byte offset 5 \(byte 0x80\)"):
        read_text_file(text)
    assert read_text_file(text, on_invalid_utf8="replace") == "to be\ufffd"
    with pytest.raises(CorpusError, match="on_invalid_utf8='ignore' is not a policy"):
        list(iter_jsonl(jsonl, on_invalid_utf8="ignore"))


def test_parquet_strings_that_are_not_utf8_name_file_and_row(tmp_path):
    path = tmp_path / "c.parquet"
    raw = pa.array([b"fine", b"bad \xff here"], pa.binary())
    texts = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())  # no UTF-8 validation here
    pq.write_table(pa.table({"id": pa.array(["a", "b"]), "text": texts}), path)
    with pytest.raises(CorpusError) as err:
        list(iter_parquet(path))
    assert str(err.value) == (
        f"{path}: row 1: column 'text' holds invalid UTF-8 (byte offset 4 of the value); expected UTF-8 strings"
    )


@pytest.mark.parametrize(
    "line, fragment",
    [
        ('{"id": "b", "text": "x", "id": "c"}', ':2: key "id" appears twice in one object; expected each key once'),
        ("[" * 100_000 + "]" * 100_000, ":2: JSON nested too deeply; expected one flat object per line"),
        ('{"id": "b", "text": 1' + "0" * 5000 + "}", ":2: malformed JSON (Exceeds the limit"),
        ('{"id": "b", "text": "x"', ":2: malformed JSON (Expecting ',' delimiter at column 24); expected one object per line"),
        ('{"id": "", "text": "x"}', ':2: empty "id" (expected a non-empty string)'),
        ('{"id": "b"}', ':2: missing "text" (expected {"id": str, "text": str})'),
    ],
)
def test_malformed_jsonl_lines_name_the_line_or_are_skipped_and_counted(tmp_path, line, fragment):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "text": "ok"}\n' + line + '\n{"id": "z", "text": "end"}\n')
    with pytest.raises(CorpusError) as err:
        Corpus.from_jsonl(path)
    assert str(err.value).startswith(f"{path}{fragment}")
    corpus = Corpus.from_jsonl(path, skip_bad_lines=True)
    assert corpus.ids() == ["a", "z"]
    assert corpus.report.skipped_bad_lines == 1 and corpus.report.first_problems[0].startswith(f"{path}:2:")


def test_nul_in_jsonl_raw_or_escaped_is_text(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"id": "a", "text": "x\\u0000y"}\n{"id": "b", "text": "raw\x00nul"}\n')
    assert [d.text for d in iter_jsonl(path)] == ["x\x00y", "raw\x00nul"]


def test_folder_file_that_cannot_be_read_is_a_corpus_error(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("x")
    original = Path.read_bytes

    def failing(self):
        if self.name == "a.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", failing)
    with pytest.raises(CorpusError, match=r"a.txt: cannot read corpus file: Permission denied"):
        list(iter_folder(tmp_path))


# -- enormous documents ---------------------------------------------------------------------------


def test_twenty_megabyte_document_through_char_and_bpe_and_the_store(tmp_path, shakespeare_text):
    text = shakespeare_text * (20_000_000 // len(shakespeare_text) + 1)
    assert len(text) >= 20_000_000
    char = CharTokenizer.fit(shakespeare_text)
    bpe = BpeTrainer(50).train(shakespeare_text)
    encoded = {}
    for tok in (char, bpe):
        values, offsets = tok.encode_documents([text], ["big"])
        assert offsets.tolist() == [0, values.shape[0]] and values[0] == tok.bos_id and values[-1] == tok.eos_id
        encoded[tok.kind] = (values, offsets)
    assert encoded["char"][0].shape[0] == len(text) + 2
    head = bpe.decode(encoded["bpe"][0][1:2000])
    assert text.startswith(head) and len(head) > 2000
    with TokenStore.writer(tmp_path / "store", bpe) as writer:
        writer.write_chunk("train", ["big"], *encoded["bpe"])
    store = TokenStore.open(tmp_path / "store")
    store.verify()
    values, offsets = store.arrays("train")
    assert np.array_equal(values, encoded["bpe"][0])


def test_one_megabyte_single_word_through_bpe(shakespeare_text):
    import re

    bpe = BpeTrainer(300).train(shakespeare_text)
    letters = re.sub(r"[^A-Za-z]", "", shakespeare_text)[:1_000_000]
    for word in ("ab" * 500_000, letters, "th" * 500_000):
        ids = bpe.encode(word)
        assert bpe.decode(ids) == word
    assert bpe.encode(letters).shape[0] < 0.6 * len(letters)


# -- corrupt files -------------------------------------------------------------------------------


def small_store(path: Path) -> TokenStore:
    tok = CharTokenizer.fit("abcdefgh ")
    docs = {
        "train": [EncodedDocument(f"t{i}", "train", tok.encode_document("abc defg " * (i + 1))) for i in range(20)],
        "validation": [EncodedDocument("v", "validation", tok.encode_document("hgf"))],
    }
    return TokenStore.write(path, docs, tok)


def test_truncated_store_file_is_detected_on_open(tmp_path):
    path = tmp_path / "store"
    small_store(path)
    file = path / "split=train" / "part-00000.parquet"
    size = file.stat().st_size
    file.write_bytes(file.read_bytes()[: size // 2])
    with pytest.raises(StoreError) as err:
        TokenStore.open(path)
    assert str(err.value) == (
        f"{file}: size is {size // 2} bytes, the manifest expects {size}; the file is truncated or changed"
    )


def test_flipped_byte_in_store_is_detected_by_verify(tmp_path):
    path = tmp_path / "store"
    small_store(path)
    file = path / "split=train" / "part-00000.parquet"
    data = bytearray(file.read_bytes())
    data[8] ^= 0x01  # inside the first data page: footer, size and row counts still match
    file.write_bytes(bytes(data))
    store = TokenStore.open(path)
    with pytest.raises(StoreError, match=r"part-00000.parquet: sha256 is [0-9a-f]{64}, the manifest expects [0-9a-f]{64}; the file is corrupt"):
        store.verify()


def test_truncated_parquet_corpus_is_a_corpus_error(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(100)], "text": ["x" * 50] * 100}), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])
    with pytest.raises(CorpusError, match="c.parquet: cannot read Parquet file: "):
        list(iter_parquet(path))


@pytest.fixture()
def saved_bpe(tmp_path):
    tok = BpeTrainer(20).train(TRAIN)
    return tok, tok.save(tmp_path / "bpe.json")


def test_truncated_tokenizer_file(saved_bpe):
    tok, path = saved_bpe
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(TokenizerError, match=r"bpe.json: tokenizer file is not valid JSON \(.*\); is it truncated\?"):
        load_tokenizer(path)


def test_flipped_character_in_tokenizer_payload(saved_bpe):
    tok, path = saved_bpe
    raw = path.read_text(encoding="utf-8")
    at = raw.index('"merges":[["') + len('"merges":[["')
    flipped = raw[:at] + ("q" if raw[at] != "q" else "z") + raw[at + 1 :]
    path.write_text(flipped, encoding="utf-8")
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(path)
    assert str(err.value).startswith(
        f"{path}: tokenizer file is corrupt: recorded hash '{tok.hash}' does not match its content (content hashes to "
    )


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"version": 2}, "tokenizer file format version 2 is newer than this engine supports (1); upgrade engine to read it"),
        ({"version": 0}, "tokenizer file format version 0 is not supported (expected 1)"),
        ({"version": True}, 'missing or non-integer "version" (expected 1)'),
        ({"kind": "sentencepiece"}, "unknown tokenizer kind 'sentencepiece' (expected one of: "),
        ({"format": "hf"}, 'not an engine tokenizer file (expected "format": "engine.tokenizer")'),
    ],
)
def test_tokenizer_file_header_problems(saved_bpe, change, fragment):
    tok, path = saved_bpe
    obj = json.loads(path.read_text())
    obj.update(change)
    path.write_text(json.dumps(obj))
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(path)
    assert str(err.value).startswith(f"{path}: {fragment}")


def test_foreign_json_files_are_not_tokenizers(tmp_path):
    (tmp_path / "list.json").write_text(json.dumps([1, 2]))
    with pytest.raises(TokenizerError, match='list.json: not an engine tokenizer file \\(expected "format": "engine.tokenizer"\\)'):
        load_tokenizer(tmp_path / "list.json")
    # A JSON object with a "model" is read as a Hugging Face tokenizer.json, and checked as one.
    (tmp_path / "hf.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {}, "merges": []}}))
    with pytest.raises(TokenizerError, match="hf.json: unsupported pre_tokenizer null; expected ByteLevel"):
        load_tokenizer(tmp_path / "hf.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TokenizerError, match="deep.json: tokenizer file is not valid JSON"):
        load_tokenizer(tmp_path / "deep.json")


def test_tokenizer_payload_with_matching_hash_but_bad_content(tmp_path):
    import hashlib

    from engine.tokenizers.base import canonical_json

    def write(kind, payload, raw_payload=None):
        digest = hashlib.sha256(canonical_json({"kind": kind, "payload": payload})).hexdigest() if raw_payload is None else "0" * 64
        text = json.dumps({"format": "engine.tokenizer", "version": 1, "kind": kind, "hash": digest, "payload": payload})
        if raw_payload is not None:
            text = text.replace('"PAYLOAD"', raw_payload)
        (tmp_path / "t.json").write_text(text)
        return tmp_path / "t.json"

    with pytest.raises(TokenizerError, match=r"t.json: malformed bpe tokenizer payload: bpe tokenizer: history entry 0 is \(1e\+400, 1\)|history entry 0"):
        load_tokenizer(write("bpe", {"alphabet": "ab", "merges": [["a", "b"]], "history": [[1e400, 1]]}))
    with pytest.raises(TokenizerError, match=r"t.json: malformed char tokenizer payload \(KeyError: 'alphabet'\)"):
        load_tokenizer(write("char", {}))
    with pytest.raises(TokenizerError, match=r"t.json: malformed char tokenizer payload: char tokenizer: alphabet must be distinct"):
        load_tokenizer(write("char", {"alphabet": "ba"}))
    with pytest.raises(TokenizerError, match=r"t.json: tokenizer file holds a lone surrogate \(U\+D800\) in its payload"):
        load_tokenizer(write("char", "PAYLOAD", raw_payload='{"alphabet": "\\ud800"}'))


# -- the writer lock ---------------------------------------------------------------------------------

HOLD_LOCK = """
import sys, time
from pathlib import Path
from engine.store import EncodedDocument, TokenStore
from engine.tokenizers.char import CharTokenizer
tok = CharTokenizer.fit("ab")
with TokenStore.writer(sys.argv[1], tok) as w:
    w.write_documents("train", [EncodedDocument("held", "train", tok.encode_document("ab"))])
    print("locked", flush=True)
    while not Path(sys.argv[2]).exists():
        time.sleep(0.02)
"""


def test_second_writer_fails_naming_lock_and_pid_then_waits_and_succeeds(tmp_path):
    store, release = tmp_path / "store", tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(store), str(release)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        tok = CharTokenizer.fit("xy")
        docs = {"train": [EncodedDocument("mine", "train", tok.encode_document("xy"))]}
        with pytest.raises(StoreError) as err:
            TokenStore.write(store, docs, tok)
        lock = tmp_path / "store.lock"
        assert str(err.value).startswith(
            f"{lock}: token store {store} is being written by process {holder.pid} (lock file {lock});"
        )
        assert not store.exists()
        result = {}

        def second():
            result["store"] = TokenStore.write(store, docs, tok, wait=True, timeout=60)

        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.3)
        assert waiter.is_alive() and "store" not in result  # still waiting for the first writer
        release.touch()
        assert holder.wait(timeout=60) == 0
        waiter.join(timeout=60)
        assert result["store"].ids("train") == ["mine"]
        assert not lock.exists()
    finally:
        release.touch()
        holder.wait(timeout=60)


# -- the CLI -------------------------------------------------------------------------------------------


def test_cli_user_errors_exit_2_with_one_line(tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["inspect", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert result.stderr == f"error: {tmp_path / 'nowhere'}: no token store here (directory not found)\n"
    small_store(tmp_path / "store")
    result = runner.invoke(main, ["pack", str(tmp_path / "store"), "--row-length", "0"])
    assert result.exit_code == 2 and result.stderr == "error: row_length=0: expected an integer >= 1\n"
    assert "Traceback" not in result.output


def test_cli_os_errors_are_user_errors(tmp_path, shakespeare_text):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "play.txt").write_text(shakespeare_text[:2000])
    result = CliRunner().invoke(main, ["tokenizers", "train", str(tmp_path / "play.txt"), "--kind", "char",
                                       "--out", str(tmp_path / "a_file" / "tok.json")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {tmp_path / 'a_file'}") and result.stderr.count("\n") == 1


def test_cli_internal_errors_exit_1_and_point_to_debug(tmp_path, monkeypatch):
    import engine.commands.inspect as inspect_command

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(inspect_command.TokenStore, "open", broken)
    result = CliRunner().invoke(main, ["inspect", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr == "internal error: RuntimeError: boom (run with --debug for the traceback)\n"
    result = CliRunner().invoke(main, ["--debug", "inspect", str(tmp_path)])
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr and "RuntimeError: boom" in result.stderr


def test_cli_debug_shows_the_traceback_of_user_errors_too(tmp_path):
    result = CliRunner().invoke(main, ["--debug", "inspect", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.endswith(f"error: {tmp_path / 'nowhere'}: no token store here (directory not found)\n")


def test_cli_usage_errors_exit_2(tmp_path):
    runner = CliRunner()
    for args in (["pack", str(tmp_path)], ["no-such-command"], ["pack", str(tmp_path), "--row-length", "ten"]):
        result = runner.invoke(main, args)
        assert result.exit_code == 2, args
        assert "Usage:" in result.stderr and "Traceback" not in result.output


def test_cli_invalid_utf8_policy_for_compare(tmp_path):
    text = tmp_path / "play.txt"
    text.write_bytes(b"to be or not\xff to be")
    result = CliRunner().invoke(main, ["tokenizers", "compare", str(text), "--merges", "2", "--context", "2"])
    assert result.exit_code == 2
    assert result.stderr == (f"error: {text}: invalid UTF-8 at byte offset 12 (byte 0xff); expected UTF-8 text "
                             "(--on-invalid-utf8 replace or skip accepts it)\n")
    result = CliRunner().invoke(main, ["tokenizers", "compare", str(text), "--merges", "2", "--context", "2",
                                       "--on-invalid-utf8", "replace", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)


def test_pack_output_survives_a_stale_previous_directory(tmp_path):
    small_store(tmp_path / "store")
    out = tmp_path / "packed"
    args = ["pack", str(tmp_path / "store"), "--row-length", "16", "--out", str(out)]
    assert CliRunner().invoke(main, args).exit_code == 0
    (tmp_path / ".packed.previous").mkdir()  # a run killed between its two renames left this
    (tmp_path / ".packed.previous" / "rows.parquet").write_text("stale")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert pq.read_table(out / "rows.parquet").num_rows > 0
    assert not (tmp_path / ".packed.previous").exists()


# -- byte-level tokenizer batches and ids, and oversized sampled batches ---------------------------


@pytest.fixture(scope="module")
def tiny_byte_bpe():
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    return ByteBpeTrainer(merges=5).train(["hello hello world"])


@pytest.mark.parametrize(
    "texts, ids, fragment",
    [
        (["a", 5], None, "expected"),
        ("ab", None, "texts is str, expected a list"),
        (["a", "b"], ["only-one"], "document"),
    ],
)
def test_byte_bpe_encode_documents_rejects_bad_batches(tiny_byte_bpe, texts, ids, fragment):
    with pytest.raises(TokenizerError, match=fragment):
        tiny_byte_bpe.encode_documents(texts, ids)


@pytest.mark.parametrize("ids, fragment", [([2**63], str(2**63)), ([1.5], "expected integer ids"), ([3, -1], "-1")])
def test_byte_bpe_decode_rejects_bad_ids(tiny_byte_bpe, ids, fragment):
    with pytest.raises(TokenizerError, match=re.escape(fragment)):
        tiny_byte_bpe.decode(ids)


def test_sample_windows_batch_too_large_is_a_configuration_error():
    from engine.windows import sample_windows

    with pytest.raises(ConfigurationError, match="more than this machine can allocate"):
        sample_windows(np.arange(100, dtype=np.uint32), 2**62, 8, seed=1)
