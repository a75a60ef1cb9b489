"""Properties over random input: readers raise nothing but CorpusError and round-trip valid documents;
tokenizers round-trip their alphabet and their file; mutated tokenizer files load identically or
raise TokenizerError; the long-word BPE path equals the scan."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from engine.corpus import ReadReport, iter_folder, iter_jsonl, iter_parquet
from engine.errors import CorpusError, TokenizerError
from engine.tokenizers.base import load_tokenizer
from engine.tokenizers.bpe import BpeTrainer
from engine.tokenizers.char import CharTokenizer
from engine.tokenizers.word import WordTokenizer

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# Text as a corpus holds it: any code point except lone surrogates (NUL and controls included).
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
IDS = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)
LINE_BYTES = st.binary(max_size=60) | st.sampled_from(
    [b'{"id": "x", "text": "y"}', b'{"id": 1, "text": "y"}', b"[", b'{"id": "x"}', b'"\\ud800"', b"\xff\xfe", b"\x00"]
)


@SETTINGS
@given(lines=st.lists(LINE_BYTES, max_size=6), policy=st.sampled_from(["error", "replace", "skip"]), skip=st.booleans())
def test_jsonl_random_lines_raise_only_corpus_errors(tmp_path, lines, policy, skip):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\n".join(lines))
    try:
        docs = list(iter_jsonl(path, on_invalid_utf8=policy, skip_bad_lines=skip))
    except CorpusError:
        return
    for doc in docs:
        assert isinstance(doc.text, str) and doc.id
        doc.text.encode("utf-8")


@SETTINGS
@given(docs=st.dictionaries(IDS, TEXT, max_size=6), ascii_only=st.booleans())
def test_jsonl_valid_documents_round_trip(tmp_path, docs, ascii_only):
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=ascii_only) + "\n" for i, t in docs.items()),
                    encoding="utf-8")
    assert [(d.id, d.text) for d in iter_jsonl(path)] == list(docs.items())


def parquet_bytes(ids, texts) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string())}), sink)
    return sink.getvalue()


VALID_PARQUET = parquet_bytes(["a", "b", "c"], ["one", "two\x00", "three ✓"])


@SETTINGS
@given(edits=st.lists(st.tuples(st.integers(0, len(VALID_PARQUET) - 1), st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.integers(0, len(VALID_PARQUET)))
def test_parquet_random_corruption_raises_only_corpus_errors(tmp_path, edits, cut):
    data = bytearray(VALID_PARQUET)
    for at, value in edits:
        data[at] = value
    path = tmp_path / "c.parquet"
    path.write_bytes(bytes(data[: max(cut, len(data) - 64)]) if cut % 2 else bytes(data))
    try:
        docs = list(iter_parquet(path, batch_size=2))
    except CorpusError:
        return
    assert all(isinstance(d.text, str) and d.id for d in docs)


@SETTINGS
@given(raw=st.binary(max_size=200))
def test_parquet_random_bytes_raise_only_corpus_errors(tmp_path, raw):
    path = tmp_path / "c.parquet"
    path.write_bytes(raw)
    with pytest.raises(CorpusError):
        list(iter_parquet(path))


@SETTINGS
@given(docs=st.dictionaries(IDS, TEXT, max_size=6))
def test_parquet_valid_documents_round_trip(tmp_path, docs):
    path = tmp_path / "c.parquet"
    path.write_bytes(parquet_bytes(list(docs), list(docs.values())))
    assert [(d.id, d.text) for d in iter_parquet(path, batch_size=2)] == list(docs.items())


@SETTINGS
@given(files=st.lists(st.binary(max_size=30), min_size=1, max_size=4), policy=st.sampled_from(["error", "replace", "skip"]))
def test_folder_random_bytes_raise_only_corpus_errors_and_valid_utf8_round_trips(tmp_path_factory, files, policy):
    root = tmp_path_factory.mktemp("folder")
    for i, raw in enumerate(files):
        (root / f"f{i}.txt").write_bytes(raw)
    report = ReadReport()
    try:
        docs = list(iter_folder(root, on_invalid_utf8=policy, report=report))
    except CorpusError as exc:
        assert policy == "error" and "invalid UTF-8 at byte offset" in str(exc)
        return
    valid = {f"f{i}.txt": raw.decode("utf-8") for i, raw in enumerate(files) if _utf8(raw)}
    for doc in docs:
        if doc.id in valid:
            assert doc.text == valid[doc.id]
    if policy == "skip":
        assert [d.id for d in docs] == sorted(valid)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


# -- tokenizers ---------------------------------------------------------------------------------

FIT = {
    "char": CharTokenizer.fit,
    "word": WordTokenizer.fit,
    "bpe": lambda text: BpeTrainer(15).train(text),
}


@SETTINGS
@given(kind=st.sampled_from(sorted(FIT)), train=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60),
       data=st.data())
def test_tokenizers_round_trip_text_within_their_alphabet_and_their_file(tmp_path, kind, train, data):
    tok = FIT[kind](train)
    if kind == "word":  # a run of whole training pieces: joining other pieces could fuse unseen words
        pieces = tok.tokenize(train)
        start = data.draw(st.integers(0, len(pieces)))
        text = "".join(pieces[start : data.draw(st.integers(start, len(pieces)))])
    else:
        text = data.draw(st.text(st.sampled_from(sorted(set(train))), max_size=40))
    assert tok.decode(tok.encode(text)) == text
    values, offsets = tok.encode_documents([text, train], ["a", "b"])
    assert tok.decode(values[offsets[0] : offsets[1]]) == text and tok.decode(values[offsets[1] : offsets[2]]) == train
    loaded = load_tokenizer(tok.save(tmp_path / f"{kind}.json"))
    assert loaded == tok and loaded.vocab_size == tok.vocab_size
    assert np.array_equal(loaded.encode(train), tok.encode(train)) and loaded.decode(tok.encode(text)) == text


@pytest.fixture(scope="module")
def saved_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    text = "the cat sat on the mat.\x00 ünï ✓"
    toks = [CharTokenizer.fit(text), WordTokenizer.fit(text, unknown="<unk>"), BpeTrainer(12).train(text)]
    return [(tok, tok.save(root / f"{tok.kind}.json").read_bytes()) for tok in toks]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 2), seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 4))
def test_mutated_tokenizer_file_loads_identically_or_raises_tokenizer_error(tmp_path, saved_files, which, seed, edits):
    tok, raw = saved_files[which]
    rng = random.Random(seed)
    data = bytearray(raw)
    for _ in range(edits):
        op, at = rng.randrange(4), rng.randrange(len(data) + 1)
        if op == 0 and at < len(data):
            data[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            del data[at : at + rng.randint(1, 8)]
        elif op == 2:
            data[at:at] = rng.choice([b" ", b"\x00", b'"', b"\\ud800", b"[", b"9" * 30, b"\xff"])
        else:
            data = data[:at]
    path = tmp_path / "mutated.json"
    path.write_bytes(bytes(data))
    try:
        loaded = load_tokenizer(path)
    except TokenizerError:
        return
    assert loaded == tok and loaded.decode(loaded.encode("the cat")) == "the cat"


# -- long words: the heap path equals the scan -------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(alphabet=st.sampled_from(["ab", "abc", "abcd", "aab"]), seed=st.integers(0, 2**32 - 1),
       merges=st.integers(0, 40), length=st.integers(1, 400))
def test_long_word_heap_path_equals_the_scan(alphabet, seed, merges, length):
    from engine.kernels.bpe_encode import encode_words, map_symbols
    from engine.tokenizers.word import analyse_words

    rng = random.Random(seed)
    train = "".join(rng.choice(alphabet + "  ") for _ in range(300)).strip() or alphabet
    tok = BpeTrainer(merges).train(train)
    word = "".join(rng.choice(tok.alphabet.replace(" ", "") or "a") for _ in range(length))
    analysis = analyse_words([word])
    symbols, unknown = map_symbols(analysis.word_cps, tok._char_table)
    assert unknown < 0
    args = (symbols, analysis.word_offsets, *tok._merge_table, tok._left, tok._right, tok._made, tok._priorities)
    heap_pieces, heap_offsets = encode_words(*args, 0)
    scan_pieces, scan_offsets = encode_words(*args, 1 << 40)
    assert heap_pieces.tolist() == scan_pieces.tolist() and heap_offsets.tolist() == scan_offsets.tolist()
    assert tok.decode(tok.encode(word)) == word
