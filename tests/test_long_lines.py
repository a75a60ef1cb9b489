"""Documents too long to hold: a long JSONL line's text stays in its file (engine.corpus.long_lines),
is encoded span by span into a file of ids, and becomes a store file of its own, written page by page
(engine.store.long_rows). Thresholds are forced tiny, so every path runs on small texts; the
documents, reports and stores equal those of reading every line whole."""

import io
import json
import random
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.corpus.long_lines as long_lines
from engine.chat.records import detect_format
from engine.corpus import ReadLimits
from engine.corpus.readers import iter_jsonl
from engine.errors import CorpusError
from engine.kernels.json_numbers import INVALID, number_array
from engine.store import TokenStore, TokenStoreWriter
from engine.store.layout import TOKENS_TYPE
from engine.store.long_rows import write_long_row
from tests.naive import naive_number_array

# JSON's escapes (quote, backslash, control characters, \u2028), characters of 2-4 UTF-8 bytes
# (a surrogate pair when escaped), NUL and plain words.
ATOMS = ["a", "word ", " ", '"', "\\", "\\\\", "\n", "\r\n", "\t", "é", "Ω", "中", "😀", "\u2028", "\x00", "/",
         "don't ", "x86", "  "]


def random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ATOMS) for _ in range(n))


def thresholds(line: int, string: int = 60, part: int = 23, block: int = 50) -> ReadLimits:
    """Long lines from ``line`` bytes, long strings from ``string``, parts and scan blocks of a few bytes."""
    return ReadLimits(long_line_bytes=line, long_string_bytes=string, part_bytes=part, scan_block_bytes=block)


def prepare_thresholds(line: int, string: int = 60, part: int = 23, block: int = 50, stream_chars: int = 50,
                       **others) -> dict:
    """``prepare``'s ``limits`` with ``thresholds``'s sizes and spans of ``stream_chars`` characters."""
    from engine.pipeline import PrepareLimits

    return {"limits": PrepareLimits(long_line_bytes=line, long_string_bytes=string, long_part_bytes=part,
                                    long_scan_block_bytes=block, stream_chars=stream_chars, **others)}


TINY = thresholds(300)


def read_whole_and_long(path, limits: ReadLimits, **options) -> list:
    """The documents (or the error) of ``path`` read with every line whole, then with long lines scanned."""
    results = []
    for long in (False, True):
        try:
            results.append([(d.id, str(d.text)) for d in iter_jsonl(path, long_lines=long, limits=limits, **options)])
        except CorpusError as exc:
            results.append(str(exc))
    return results


def store_schema():
    return pa.schema([pa.field("id", pa.string()), pa.field("tokens", TOKENS_TYPE)], metadata={"engine.k": "v"})


@pytest.mark.parametrize("count,page_values,codec", [(2, 1, "snappy"), (10, 3, "snappy"), (100_003, 4096, "snappy"),
                                                      (7, 7, "uncompressed"), (5, 1 << 20, "snappy")])
def test_long_row_file_reads_back_as_the_file_arrow_writes(tmp_path, count, page_values, codec):
    ids = np.random.default_rng(count).integers(0, 2**32, count, dtype=np.uint64).astype(np.uint32)
    ids.tofile(tmp_path / "ids.u32")
    write_long_row(tmp_path / "long.parquet", store_schema(), "dóc\n1", tmp_path / "ids.u32", count,
                   page_values=page_values, codec=codec)
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": ["dóc\n1"], "tokens": pa.array([ids], TOKENS_TYPE)}, schema=store_schema()), sink)
    sink.seek(0)
    arrow = pq.read_table(sink)
    ours = pq.ParquetFile(tmp_path / "long.parquet")
    assert ours.metadata.num_rows == 1 and ours.metadata.num_row_groups == 1
    assert ours.metadata.row_group(0).column(1).compression == codec.upper()
    table = ours.read()
    assert table.schema.equals(arrow.schema, check_metadata=True)
    assert table.equals(arrow)
    assert pq.read_table(tmp_path / "long.parquet", columns=["id"]).column("id").to_pylist() == ["dóc\n1"]


def test_long_row_refuses_an_ids_file_shorter_than_its_count(tmp_path):
    np.arange(5, dtype=np.uint32).tofile(tmp_path / "ids.u32")
    with pytest.raises(OSError, match="holds 5 ids, expected 9"):
        write_long_row(tmp_path / "x.parquet", store_schema(), "d", tmp_path / "ids.u32", 9, page_values=4)


def write_corpus(path, rng, docs, *, ensure_ascii=None, extra_fields=True):
    lines = []
    for k in range(docs):
        text = random_text(rng, rng.choice([1, 4, 30, 90, 400]))
        obj = {"id": f"d{k}", "text": text}
        if extra_fields and rng.random() < 0.3:  # the text first, a long field the reader ignores
            obj = {"text": text, "meta": {"note": "m" * rng.randint(0, 200)}, "id": f"d{k}", "n": 1.5}
        ascii_ = rng.random() < 0.5 if ensure_ascii is None else ensure_ascii
        lines.append(json.dumps(obj, ensure_ascii=ascii_))
    path.write_text("\n".join(lines) + ("\n" if rng.random() < 0.5 else ""), encoding="utf-8")


def test_long_lines_give_the_documents_of_whole_lines(tmp_path):
    rng = random.Random(5)
    kinds = {"str": 0, "LongText": 0}
    for trial in range(120):
        path = tmp_path / f"c{trial}.jsonl"
        write_corpus(path, rng, rng.randint(1, 5))
        whole = [(d.id, d.text) for d in iter_jsonl(path)]
        docs = list(iter_jsonl(path, long_lines=True, limits=TINY))
        assert [(d.id, str(d.text)) for d in docs] == whole, trial
        for doc, (_, text) in zip(docs, whole):
            kinds[type(doc.text).__name__] += 1
            assert len(doc.text) == len(text)
            if not isinstance(doc.text, str):
                assert doc.text.utf8_bytes == len(text.encode("utf-8"))
                assert "".join(doc.text.parts()) == text and b"".join(doc.text.utf8_parts()) == text.encode()
    assert kinds["str"] > 50 and kinds["LongText"] > 50


@pytest.mark.parametrize("body", [
    "\\\\" * 100,  # an escape run longer than a part: the part grows until it holds a place to cut
    "\\ud83d\\ude00" * 30,  # surrogate pairs at every offset: never cut between the two halves
    "a\\u00e9\\n\\\"" * 25,
    "é中😀" * 40,  # characters of 2-4 bytes at every offset
])
def test_parts_never_cut_an_escape_a_pair_or_a_character(tmp_path, body):
    raw = b"xx" + body.encode("utf-8") + b"yy"
    (tmp_path / "body").write_bytes(raw)
    expected = json.loads('"' + raw.decode("utf-8") + '"')
    for part_bytes in (13, 14, 15, 16, 17, 29):
        parts = [part for _, part in long_lines._decoded_parts(tmp_path / "body", 0, len(raw), True, part_bytes)]
        assert None not in parts and "".join(parts) == expected, part_bytes
        assert len(parts) > 1


@pytest.mark.parametrize("line", [
    b'{"id": "a", "text": "' + b"x" * 300 + b"\xff" + b"y" * 300 + b'"}\n',  # invalid UTF-8
    b'{"id": "a", "text": "' + b"x" * 300 + b"\\ud800" + b"y" * 300 + b'"}\n',  # a lone surrogate
    b'{"id": "a", "text": "' + b"x" * 300 + b"\\q" + b"y" * 300 + b'"}\n',  # a bad escape
    b'{"id": "a", "text": "' + b"x" * 600 + b"\n",  # the line ends inside the string
    b'{"id": "a", "text": "' + b"x" * 600,  # the file ends inside it
    b'{"id": "a", "text": "' + b"x" * 600 + b'", "text": "b"}\n',  # a repeated key
    b'{"id": "' + b"i" * 300 + b'", "text": "' + b"x" * 300 + b'"}\n',  # a long id: read whole, fine
    b'{"id": 5, "text": "' + b"x" * 300 + b'"}\n',
    b'{"id": "a", "text": "' + b"x" * 300 + b'"} x\n',  # data after the object
    b'["' + b"x" * 600 + b'"]\n',
])
@pytest.mark.parametrize("policy", ["error", "replace", "skip"])
def test_lines_the_scan_cannot_take_read_as_whole_lines_do(tmp_path, line, policy):
    path = tmp_path / "c.jsonl"
    path.write_bytes(line + b'{"id": "b", "text": "' + b"z" * 400 + b'"}\n')
    whole, long = read_whole_and_long(path, TINY, on_invalid_utf8=policy)
    assert whole == long


def test_a_file_changed_under_a_long_text_is_an_error(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"id": "a", "text": "' + b"x" * 600 + b'"}\n')
    (doc,) = iter_jsonl(path, long_lines=True, limits=TINY)
    path.write_bytes(b'{"id": "a", "text": "' + b"x" * 300 + b"\xff" * 300 + b'"}\n')
    with pytest.raises(CorpusError, match=r"c.jsonl:1: the file changed while it was read"):
        str(doc.text)


def long_corpus(path, seed=3):
    rng = random.Random(seed)
    write_corpus(path, rng, 30, extra_fields=False)
    return path


@pytest.mark.parametrize("tokenizer", ["byte-bpe", "bpe", "char", "word"])
def test_prepare_writes_long_texts_as_files_of_their_own_with_the_same_tokens(tokenizer, tmp_path):
    from engine.pipeline import prepare

    corpus = long_corpus(tmp_path / "c.jsonl")
    options = dict(tokenizer=tokenizer, merges=60, context_length=8, threads=2, quiet=True,
                   hash_split={"train": 0.8, "validation": 0.1, "test": 0.1})
    whole = prepare(corpus, None, tmp_path / "whole", **options)
    long = prepare(corpus, None, tmp_path / "long", **options, **prepare_thresholds(500, 100, 37))
    assert long.report["partitions"] == whole.report["partitions"]
    assert long.report["tokenizer"]["hash"] == whole.report["tokenizer"]["hash"]
    a, b = TokenStore.open(whole.store_path), TokenStore.open(long.store_path)
    b.verify()
    singles = 0
    for part in ("train", "validation", "test"):
        (va, oa), (vb, ob) = a.arrays(part), b.arrays(part)
        assert np.array_equal(va, vb) and np.array_equal(oa, ob) and a.ids(part) == b.ids(part)
        for file in sorted((long.store_path / f"split={part}").glob("*.parquet")):
            if pq.ParquetFile(file).metadata.created_by == "engine":  # written by long_rows
                assert pq.read_metadata(file).num_rows == 1
                singles += 1
    lines = corpus.read_bytes().split(b"\n")  # (str.splitlines would also cut at a raw U+2028)
    assert singles == sum(len(line) >= 500 for line in lines) > 3
    assert [p.name for p in long.store_path.iterdir() if p.name.startswith(".")] == []


def test_resume_after_ctrl_c_keeps_files_before_a_long_text_and_equals_a_fresh_run(tmp_path, monkeypatch):
    from engine.pipeline import PrepareLimits, prepare

    corpus = long_corpus(tmp_path / "c.jsonl", seed=8)
    small_files = prepare_thresholds(500, 100, stream_chars=PrepareLimits().stream_chars, store_file_rows=2,
                                     store_row_group_rows=1, encode_chunk_documents=2)
    options = dict(tokenizer="char", context_length=8, threads=2, quiet=True, hash_split={"train": 1.0},
                   **small_files)
    fresh = prepare(corpus, None, tmp_path / "fresh", **options)
    real_long, calls = TokenStoreWriter.write_long_document, [0]

    def write_long_document(self, *args, **kwargs):
        if calls[0] == 2:
            raise KeyboardInterrupt
        calls[0] += 1
        return real_long(self, *args, **kwargs)

    monkeypatch.setattr(TokenStoreWriter, "write_long_document", write_long_document)
    with pytest.raises(KeyboardInterrupt):
        prepare(corpus, None, tmp_path / "out", **options)
    monkeypatch.setattr(TokenStoreWriter, "write_long_document", real_long)
    import engine.store.resume as resume_module

    real_read, decoded = resume_module.pq.read_table, []
    monkeypatch.setattr(resume_module.pq, "read_table", lambda file, *a, **k: decoded.append(file) or real_read(file, *a, **k))
    rows = {f: pq.read_metadata(f).num_rows for f in (tmp_path / "out").glob(".store.tmp-*/split=train/part-*.parquet")}
    resumed = prepare(corpus, None, tmp_path / "out", resume=True, **options)
    assert resumed.report["resume"]["kept"]["train"]["files"] >= 1
    # Only full files are kept, and only they are decoded: a file of one long document is judged by its footer.
    assert 1 in rows.values()
    assert decoded and all(rows[Path(f)] == 2 for f in decoded)
    manifest = lambda r: json.loads((r.store_path / "_engine.json").read_text())  # noqa: E731
    assert manifest(resumed) == manifest(fresh)
    TokenStore.open(resumed.store_path).verify()


def test_a_long_file_of_a_folder_stays_in_it_and_prepare_writes_the_same_store(tmp_path):
    from engine.corpus.readers import iter_folder
    from engine.pipeline import prepare

    rng = random.Random(9)
    folder = tmp_path / "docs"
    folder.mkdir()
    for k in range(12):
        (folder / f"f{k:02d}.txt").write_text(random_text(rng, rng.choice([5, 50, 400])), encoding="utf-8")
    (folder / "bad.txt").write_bytes(b"x" * 700 + b"\xff")  # long but not UTF-8: read whole (replaced)
    options = dict(tokenizer="byte-bpe", merges=40, context_length=8, threads=2, quiet=True,
                   on_invalid_utf8="replace", hash_split={"train": 0.8, "validation": 0.1, "test": 0.1})
    whole = prepare(folder, None, tmp_path / "whole", **options)
    docs = {d.id: d.text for d in iter_folder(folder, on_invalid_utf8="replace", long_files=True,
                                              limits=thresholds(600, part=29))}
    expected = {d.id: d.text for d in iter_folder(folder, on_invalid_utf8="replace")}
    assert {k: str(v) for k, v in docs.items()} == expected
    long_ids = {k for k, v in docs.items() if not isinstance(v, str)}
    assert long_ids == {k for k, v in expected.items() if len(v.encode()) > 600 and k != "bad.txt"} != set()
    long = prepare(folder, None, tmp_path / "long", **options, **prepare_thresholds(600, part=29))
    assert long.report["partitions"] == whole.report["partitions"]
    assert long.report["read"] == whole.report["read"]
    a, b = TokenStore.open(whole.store_path), TokenStore.open(long.store_path)
    for part in ("train", "validation", "test"):
        assert np.array_equal(a.arrays(part)[0], b.arrays(part)[0]) and a.ids(part) == b.ids(part)


def test_pass_one_reports_a_long_text_part_by_part(tmp_path):
    from engine.corpus.long_lines import LongText

    path = tmp_path / "t.txt"
    path.write_text("ab" * 500, encoding="utf-8")
    text = long_lines.read_long_file(path, 1000, str(path), ReadLimits(part_bytes=64))
    assert isinstance(text, LongText) and len(text) == 1000 and text.utf8_bytes == 1000
    seen = []
    assert str(text.reporting(seen.append)) == "ab" * 500
    assert sum(seen) == 1000 and len(seen) > 10 and text.progress is None


# Inputs the jsonl fuzz target (scripts/fuzz.py) found reading differently with long_lines:
FUZZ_FOUND = [
    # a long key holding invalid UTF-8: the whole line is invalid (skipped under "skip")
    b'{"id": "a", "text": "x"}\n{"id": "b", "te' + b"x" * 40 + b"\xc8" + b"x" * 40 + b'": "d4", "text": "a"}\n',
    # a lone surrogate in the id: the policy, or --skip-bad-lines, as for a short line
    b'{"id": "\\ud800d0", "text": "the cat sat on the mat."}\n{"id": "d1", "text": "x"}\n',
    # a first line skipped for its bytes decides nothing about made ids; the next one does
    b'{"id1e999": "d0", "text": "the cat\x8a\x94\xf76Y\xd8~ sat on the mat."}\n{"id": "d1", "text": "' + b"y" * 80
    + b'"}\n{"id": "d4", "text": "a\\tb\\q' + b"x" * 60 + b'"}\n',
]


@pytest.mark.parametrize("data", FUZZ_FOUND)
@pytest.mark.parametrize("policy", ["error", "replace", "skip"])
@pytest.mark.parametrize("skip_bad_lines", [False, True])
def test_inputs_the_fuzzer_found_read_as_whole_lines_do(tmp_path, data, policy, skip_bad_lines):
    limits = thresholds(48, 12, 16, 24)  # what the fuzz target uses
    path = tmp_path / "c.jsonl"
    path.write_bytes(data)
    whole, long = read_whole_and_long(path, limits, on_invalid_utf8=policy, skip_bad_lines=skip_bad_lines)
    assert whole == long


@pytest.mark.parametrize("run", ["\\" * 5000, "a" + "\\" * 4999, "\\\"" * 2500, "\\" * 4999 + "\u00e9"])
def test_a_text_of_escaped_backslashes_is_cut_in_parts(tmp_path, run):
    """One run of escaped backslashes has a safe cut every two bytes (by parity): it is read in parts of
    about part_bytes, never grown into one part rescanned byte by byte (157 MB took 892 s and 7.1 GB)."""
    body = json.dumps(run)[1:-1].encode()
    path = tmp_path / "s.json"
    path.write_bytes(b'"' + body + b'"')
    parts = list(long_lines._decoded_parts(path, 1, 1 + len(body), True, 64))
    assert all(text is not None for _, text in parts)
    assert "".join(text for _, text in parts) == run
    assert len(parts) > len(body) // 128 and max(len(text) for _, text in parts) <= 64


def naive_body_end(data: bytes, i: int) -> int:
    """Where a JSON string body starting at ``data[i]`` stops, byte by byte: an escape takes two bytes."""
    while i < len(data):
        c = data[i]
        if c in b'"\n':
            return i
        if c == 0x5C:
            if i + 1 == len(data):
                return i  # the escape's second byte is in the next block
            if data[i + 1] == 0x0A:
                return i + 1  # a backslash before a newline: the line is malformed at the newline
            i += 2
            continue
        i += 1
    return i


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"\\", b'"', b"\n", b"u", b"\xc3\xa9"]), max_size=40),
       st.integers(min_value=0, max_value=3))
def test_the_end_of_a_string_body_is_that_of_a_byte_walk(atoms, start):
    data = b"".join(atoms)
    start = min(start, len(data))
    while start and data[start - 1] == 0x5C:  # a body never starts inside an escape
        start -= 1
    assert long_lines._body_end(data, start) == naive_body_end(data, start)


def test_a_line_of_dense_escapes_is_scanned_in_memory_that_does_not_grow_with_them(tmp_path):
    """A long text with an escape every few bytes: the scan finds the string's end with ``bytes.find``
    (a regex with a repeated group held a backtracking entry per escape: ~110 MB per 8 MB block)."""
    body = ('ab\\n' * 3_000_000).encode()  # 12 MB, an escape every 4 bytes
    line = b'{"id": "d", "text": "' + body + b'", "n": 1}\n'
    fh = io.BytesIO(line)
    fh.read(8)
    tracemalloc.start()
    try:
        skeleton, longs, end = long_lines.scan_line(fh, 0, line[:8])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert end == len(line) and len(longs) == 1
    (start, stop), = longs.values()
    assert line[start:stop] == body
    assert json.loads(skeleton, strict=False)["n"] == 1
    assert peak < 4 * ReadLimits().scan_block_bytes  # the blocks, never a structure per escape


NUMBER_ATOMS = [b"1", b"0", b"7", b"-", b".", b"e", b"E", b"+", b",", b" ", b"\t", b"]", b"a", b'"', b"[", b"9" * 39]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(NUMBER_ATOMS), max_size=30))
def test_number_arrays_are_read_as_the_plain_twin_reads_them(atoms):
    data = b"".join(atoms)
    got = number_array(np.frombuffer(data, dtype=np.uint8), 0, len(data))
    want = naive_number_array(data, 0, len(data))
    assert got[0] == want[0] and (want[0] == INVALID or got[1] == want[1])


def numbers(rng: random.Random, n: int) -> str:
    forms = [lambda: str(rng.randint(0, 65535)), lambda: f"{rng.uniform(-1, 1):.6f}", lambda: f"{rng.random():.3e}",
             lambda: "-0", lambda: f"{rng.randint(-9, 9)}E+{rng.randint(0, 9)}"]
    return ",".join(rng.choice(forms)() for _ in range(n))


def test_a_line_whose_bulk_is_a_number_array_keeps_a_small_skeleton():
    """Token ids or embeddings beside a text: each flat array of numbers stands as [0] in the skeleton
    (a 150 MB line of them was read whole: 1.34 GB), nested ones too, and the line's fields are the same."""
    rng = random.Random(5)
    rows = ", ".join(f"[{numbers(rng, 50)}]" for _ in range(300))
    line = (f'{{"id": "d", "ids": [{numbers(rng, 200_000)}], "text": "hello", "emb": [{rows}], '
            f'"tags": ["a", 1, 2], "n": [1, 2]}}\n').encode()
    fh = io.BytesIO(line)
    fh.read(8)
    skeleton, longs, end = long_lines.scan_line(fh, 0, line[:8], ReadLimits(scan_block_bytes=1 << 16))  # many blocks
    assert end == len(line) and not longs and len(skeleton) < 4096
    assert json.loads(skeleton) == {"id": "d", "ids": [0], "text": "hello", "emb": [[0]] * 300,
                                    "tags": ["a", 1, 2], "n": [1, 2]}


@pytest.mark.parametrize("array", [
    "1,2,,3", "1,2,3,", "01,2", "1.e5", "--1", "1 2", "1e", "." , "1,2" + ",3" * 10 + ",1" + "0" * 41, "NaN", "Infinity",
    '1,"a"', "1,[2,3],4", "1,true", "1,2]", "1,2", "1.5,-0.25e-3, 7 ,\t8\r",
])
@pytest.mark.parametrize("skip_bad_lines", [False, True])
def test_lines_with_number_arrays_read_as_whole_lines_do(tmp_path, array, skip_bad_lines):
    """Valid and broken arrays of every kind, long enough to be taken: the documents, the error or the
    skipped line are those of reading every line whole."""
    body = (array + ",") * (2 * long_lines._NUMBERS_BYTES // len(array) + 1) + array
    data = (b'{"id": "a", "text": "x"}\n{"id": "b", "text": "long ' + b"y" * 400 + b'", "ids": [' + body.encode()
            + b'], "z": 1}\n{"id": "c", "text": "after"}\n')
    path = tmp_path / "c.jsonl"
    path.write_bytes(data)
    whole, long = read_whole_and_long(path, TINY, skip_bad_lines=skip_bad_lines)
    assert whole == long


def test_format_detection_reads_a_long_first_line_by_its_skeleton(tmp_path):
    """``prepare`` picks text / messages / prompt-completion from the first record's keys: a long first
    line is scanned (it was read whole and parsed: a 145 MB line of ids peaked at 1.4 GB), and a raw
    tab in a text is text, as the reader takes it (it was "not valid JSON")."""
    limits = thresholds(300, 60, 23, 1 << 16)
    path = tmp_path / "c.jsonl"
    ids = numbers(random.Random(2), 400_000)
    path.write_text(f'\n{{"prompt": "{"p" * 5000}", "ids": [{ids}], "completion": "c"}}\n', "utf-8")
    tracemalloc.start()
    try:
        assert detect_format(path, limits=limits) == "prompt-completion"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < path.stat().st_size // 4
    path.write_text('{"id": "a", "text": "' + "t" * 500 + '", "messages": [{"role": "user", "content": "x"}]}\n')
    assert detect_format(path, limits=limits) == "messages"
    path.write_text('{"id": "a", "text": "tab\there", "messages_": 1}\n')
    assert detect_format(path, limits=limits) == "text"
    path.write_text('{"id": "a", "text": "' + "t" * 500 + '\n')  # malformed: the text reader says why
    assert detect_format(path, limits=limits) == "text"


def imported_tokenizer(kind: str, folder) -> str:
    """A tokenizer file engine does not fit: a Llama-3- or Llama-2-style tokenizer.json, or a
    SentencePiece .model (with or without BOS and EOS)."""
    text = (Path(__file__).resolve().parents[1] / "data" / "tinyshakespeare.txt").read_text(encoding="utf-8")[:60_000]
    if kind.startswith("hf-"):
        pytest.importorskip("tokenizers")
        from tests.naive_hf import build_family

        path = folder / f"{kind}.json"
        build_family(kind.removeprefix("hf-"), 400, [text]).save(str(path))
        return str(path)
    spm = pytest.importorskip("sentencepiece")
    (folder / "t.txt").write_text(text, encoding="utf-8")
    wrappers = {"bos_id": -1} if kind == "spm-nobos" else {"bos_id": -1, "eos_id": -1} if kind == "spm-bare" else {}
    spm.SentencePieceTrainer.train(input=str(folder / "t.txt"), model_prefix=str(folder / kind), model_type="bpe",
                                   vocab_size=600, byte_fallback=True, minloglevel=2, **wrappers)
    return str(folder / f"{kind}.model")


@pytest.mark.parametrize("kind", ["hf-llama3", "hf-llama2", "spm", "spm-nobos"])
def test_imported_tokenizers_encode_a_long_text_whole_with_the_ids_of_a_short_one(kind, tmp_path):
    """A tokenizer.json or .model has no rule for where a document may be cut, so a long text left in
    its file is encoded as one span (it was an internal error: no ``_span``), with the ids it has when
    read whole; a model without BOS stores the document without it."""
    from engine.pipeline import prepare

    corpus = long_corpus(tmp_path / "c.jsonl")
    options = dict(tokenizer=imported_tokenizer(kind, tmp_path), context_length=8, threads=2, quiet=True,
                   hash_split={"train": 0.8, "validation": 0.1, "test": 0.1})
    whole = prepare(corpus, None, tmp_path / "whole", **options)
    long = prepare(corpus, None, tmp_path / "long", **options, **prepare_thresholds(500, 100, 37))
    assert long.report["partitions"] == whole.report["partitions"]
    a, b = TokenStore.open(whole.store_path), TokenStore.open(long.store_path)
    b.verify()
    for part in ("train", "validation", "test"):
        (va, oa), (vb, ob) = a.arrays(part), b.arrays(part)
        assert np.array_equal(va, vb) and np.array_equal(oa, ob) and a.ids(part) == b.ids(part)
    assert sum(1 for f in long.store_path.glob("split=*/*.parquet") if pq.ParquetFile(f).metadata.created_by == "engine") > 3


def test_a_tokenizer_without_eos_is_refused_by_name(tmp_path):
    """Every stored document ends with an EOS: a .model trained without one exits 2 before reading."""
    from click.testing import CliRunner

    from engine.cli import main

    model = imported_tokenizer("spm-bare", tmp_path)
    corpus = long_corpus(tmp_path / "c.jsonl")
    result = CliRunner().invoke(main, ["prepare", str(corpus), "--hash-split", "1,0,0", "--tokenizer", model,
                                       "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2, result.output
    assert "the tokenizer has no EOS token, and every stored document ends with one" in result.output
    assert not (tmp_path / "out").exists()
