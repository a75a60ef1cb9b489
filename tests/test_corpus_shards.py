"""Corpora as they ship: compressed JSONL read as streams, folders and globs of shards, datasets
save_to_disk folders, nested fields, --corpus-format; every form gives the same documents and the
same store, byte for byte."""

import bz2
import dataclasses
import gzip
import json
import lzma
import random
import re
import shutil

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import zstandard

from engine.corpus import Corpus, ReadLimits, ReadReport, corpus_format, iter_jsonl, open_corpus
from engine.corpus.compressed import open_binary
from engine.corpus.long_lines import LongText
from engine.errors import ConfigurationError, CorpusError
from engine.pipeline import PrepareLimits, prepare
from tests.helpers import run

COMPRESS = {".gz": gzip.compress, ".zst": lambda b: zstandard.ZstdCompressor().compress(b), ".bz2": bz2.compress,
            ".xz": lzma.compress}
WORDS = ["alpha", "beta", "gamma", "delta", "épsilon", "ζeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]
SMALL_FILES = PrepareLimits(store_file_rows=4, store_row_group_rows=2, encode_chunk_documents=3,
                            read_batch_documents=5)
RUN = dict(tokenizer="bpe", merges=30, context_length=4, threads=2, limits=SMALL_FILES, quiet=True,
           hash_split=(0.6, 0.2, 0.2))


def lines(count=40, start=0, ids=True):
    out = []
    for i in range(start, start + count):
        text = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(i % 9 + 1))
        out.append(json.dumps({"id": f"d{i:03d}", "text": text} if ids else {"text": text}, ensure_ascii=False))
    return out


def write(path, rows, suffix=""):
    data = "".join(r + "\n" for r in rows).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(COMPRESS[suffix](data) if suffix else data)
    return path


def docs(path, **options):
    corpus = Corpus.from_path(path, **options)
    return [(d.id, d.text) for d in corpus], corpus.report


# -- compressed JSONL ---------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_compressed_jsonl_reads_like_plain_with_every_rule(tmp_path, suffix):
    rows = lines(5, ids=False)
    rows[2] = '{"text": "broken'
    rows.insert(1, "")  # a blank line: line 2; the malformed one is line 4
    plain = write(tmp_path / "c.jsonl", rows)
    packed = write(tmp_path / f"c.jsonl{suffix}", rows, suffix)
    with pytest.raises(CorpusError, match=re.escape(f"{packed}:4: malformed JSON")):
        Corpus.from_path(packed)
    got, report = docs(packed, skip_bad_lines=True)
    want, want_report = docs(plain, skip_bad_lines=True)
    # Made ids name the file as it is, compression suffix included; lines count as in the plain file.
    assert [i for i, _ in got] == [f"c.jsonl{suffix}:{n:06d}" for n in (1, 3, 5, 6)]
    assert [t for _, t in got] == [t for _, t in want]
    assert (report.documents, report.blank_lines, report.skipped_bad_lines, report.made_ids) == (4, 1, 1, True)
    assert report.first_problems == [f"{packed}:4: malformed JSON (Unterminated string starting at column 10); "
                                     "expected one object per line"]
    assert want_report.to_dict() | {"first_problems": []} == report.to_dict() | {"first_problems": []}


@pytest.mark.parametrize("name", ["c.json.gz", "c.jsonl.zstd", "C.JSONL.XZ"])
def test_json_and_other_spellings_of_compressed_jsonl(tmp_path, name):
    suffix = {"gz": ".gz", "zstd": ".zst", "xz": ".xz"}[name.rsplit(".", 1)[1].lower()]
    path = write(tmp_path / name, lines(3), suffix)
    assert corpus_format(path) == "jsonl"
    assert docs(path)[0] == docs(write(tmp_path / "p.jsonl", lines(3)))[0]


def test_invalid_utf8_offset_counts_decompressed_bytes(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "x\xff"}\n'))
    with pytest.raises(CorpusError, match=re.escape(f"{path}:2: invalid UTF-8 at byte offset 48 (byte 0xff)")):
        Corpus.from_path(path)
    assert docs(path, on_invalid_utf8="replace")[0] == [("a", "ok"), ("b", "x\ufffd")]


def test_zstd_frames_one_after_another_read_as_one_stream(tmp_path):
    rows = lines(30)
    one = "".join(r + "\n" for r in rows[:11]).encode()
    two = "".join(r + "\n" for r in rows[11:]).encode()
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(one) + zstandard.ZstdCompressor().compress(two))
    assert docs(path)[0] == docs(write(tmp_path / "p.jsonl", rows))[0]
    with open_binary(path) as fh:  # seeking back reopens, forward reads on
        fh.seek(len(one) + 3)
        assert fh.read(8) == two[3:11]
        fh.seek(2)
        assert fh.read(5) == one[2:7] and fh.tell() == 7


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_truncated_compressed_file_names_file_and_line(tmp_path, suffix):
    rng = random.Random(7)  # text that compresses little, so that the first blocks are whole
    rows = [json.dumps({"id": f"d{i:05d}", "text": "%032x" % rng.getrandbits(128)}) for i in range(20_000)]
    data = "".join(r + "\n" for r in rows).encode()
    whole = COMPRESS[suffix](data)
    path = tmp_path / f"c.jsonl{suffix}"
    path.write_bytes(whole[: len(whole) * 3 // 4])
    read = []
    with pytest.raises(CorpusError) as err:
        for doc in iter_jsonl(path):
            read.append(doc.id)
    kind = {".gz": "gzip", ".zst": "zstd", ".bz2": "bzip2", ".xz": "xz"}[suffix]
    line = len(read) + 1  # every document before the line it stopped at was read, and no other
    assert read == [f"d{i:05d}" for i in range(len(read))] and 1 < line < 20_000
    assert str(err.value).startswith(f"{path}:{line}: cannot decompress the {kind} file after line {len(read)} (")
    assert str(err.value).endswith(f"the file is corrupt or truncated (expected a complete {kind} stream)")


@pytest.mark.parametrize("checksum", [False, True])
def test_a_zstd_file_cut_anywhere_inside_a_frame_is_an_error(tmp_path, checksum):
    rows = lines(300)
    data = "".join(r + "\n" for r in rows).encode()
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    make = zstandard.ZstdCompressor(write_checksum=checksum)
    whole = make.compress(data[:5000]) + skippable + make.compress(data[5000:])
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(whole)
    assert [d.text for d in iter_jsonl(path)] == [json.loads(r)["text"] for r in rows]
    for cut in (1, 2, 3, 4, 5, 9, 50, len(whole) - len(make.compress(data[:5000])) - 1):
        path.write_bytes(whole[:-cut])
        with pytest.raises(CorpusError, match=r"cannot decompress the zstd file .*EOFError: Compressed file ended"):
            list(iter_jsonl(path))


def test_memory_for_a_zstd_file_is_a_few_buffers_whatever_the_ratio(tmp_path):
    """The decompressing thread's buffers (2 x 4 MB), the reader's buffer and the caller's reads of
    1 MB: never the 64 MB the file holds."""
    import tracemalloc

    from engine.corpus.compressed import _CHUNK_BYTES, _CHUNKS

    path = tmp_path / "c.jsonl.zst"  # 64 MB of one byte in a few kB
    path.write_bytes(zstandard.ZstdCompressor(level=19).compress(b" " * (64 << 20)))
    total = 0
    tracemalloc.start()
    try:
        with open_binary(path) as fh:
            while chunk := fh.read(1 << 20):
                total += len(chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert total == 64 << 20 and peak < _CHUNKS * _CHUNK_BYTES + (6 << 20) <= 16 << 20


def _incompressible_lines(count: int, seed: int = 11) -> bytes:
    rng = random.Random(seed)
    return "".join(json.dumps({"id": f"d{i:06d}", "text": "%064x" % rng.getrandbits(256)}) + "\n"
                   for i in range(count)).encode()


def test_zstd_reads_and_seeks_across_the_decompressing_threads_buffers(tmp_path):
    """Reads of every size and seeks back and forth over a file of several of the thread's buffers
    (4 MB each) give the plain bytes at the plain offsets."""
    from engine.corpus.compressed import _CHUNK_BYTES

    data = _incompressible_lines(120_000)  # about 11 MB: three buffers
    assert len(data) > 2 * _CHUNK_BYTES
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor(level=1).compress(data[:5_000_000])
                     + zstandard.ZstdCompressor(level=1).compress(data[5_000_000:]))
    rng = random.Random(3)
    with open_binary(path) as fh:
        assert fh.read() == data and fh.tell() == len(data)
        for _ in range(40):
            offset, size = rng.randrange(len(data)), rng.choice([1, 7, 4096, _CHUNK_BYTES - 1, _CHUNK_BYTES + 5])
            assert fh.seek(offset) == offset
            assert fh.read(size) == data[offset:offset + size] and fh.tell() == min(offset + size, len(data))
            at = fh.tell()
            if at < len(data):
                assert fh.readline() == data[at:data.index(b"\n", at) + 1]
    assert [line for line in open_binary(path)] == data.splitlines(keepends=True)


def test_a_corrupt_zstd_block_is_an_error_after_the_lines_before_it(tmp_path):
    """A byte changed in the middle of a file of several buffers: every line before the buffer it
    is in is read, in order, then the error names the file and the line it stopped at; it is raised
    again on every later read."""
    data = _incompressible_lines(120_000)
    whole = bytearray(zstandard.ZstdCompressor(level=1, write_checksum=True).compress(data))
    whole[len(whole) * 3 // 4] ^= 0xFF
    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(bytes(whole))
    read = []
    with pytest.raises(CorpusError) as err:
        for doc in iter_jsonl(path):
            read.append(doc.id)
    assert read == [f"d{i:06d}" for i in range(len(read))] and 30_000 < len(read) < 120_000
    assert str(err.value).startswith(f"{path}:{len(read) + 1}: cannot decompress the zstd file after line "
                                     f"{len(read)} (ZstdError: ")
    with open_binary(path) as fh:
        with pytest.raises(zstandard.ZstdError):
            fh.read()
        with pytest.raises(zstandard.ZstdError):
            fh.read(10)


def test_a_zstd_reader_closed_early_stops_its_thread(tmp_path):
    """Closing a reader (or dropping it) mid-file ends its decompressing thread; a missing file is an
    OSError at open, as for a plain file."""
    import gc
    import threading

    path = tmp_path / "c.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(_incompressible_lines(60_000)))

    def zstd_threads():
        return [t for t in threading.enumerate() if t.name == "engine-zstd"]

    before = len(zstd_threads())
    fh = open_binary(path)
    assert fh.readline().startswith(b'{"id": "d000000"')
    assert len(zstd_threads()) == before + 1
    fh.close()
    assert len(zstd_threads()) == before
    fh = open_binary(path)
    fh.read(100)
    fh.seek(50)  # seeking back starts a new thread in place of the old one
    assert len(zstd_threads()) == before + 1
    del fh
    gc.collect()
    assert len(zstd_threads()) == before
    with pytest.raises(FileNotFoundError):
        open_binary(tmp_path / "missing.jsonl.zst")


def test_a_file_that_is_not_what_its_suffix_says_exits_2(tmp_path):
    path = write(tmp_path / "c.jsonl.gz", lines(3))  # plain text under a .gz name
    result = run("splits", path, "--hash-split", "1,0,0", "--out", tmp_path / "s.json")
    assert result.exit_code == 2
    assert result.stderr == (f"error: {path}:1: cannot decompress the gzip file (BadGzipFile: Not a gzipped file "
                             "(b'{\"')); the file is corrupt or truncated (expected a complete gzip stream)\n")
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_long_lines_of_a_compressed_file_stay_in_it(tmp_path, suffix):
    tiny = dict(long_line_bytes=300, long_string_bytes=60, part_bytes=23, scan_block_bytes=50)
    long_text = "λόγος \\ \"quoted\" " * 40
    rows = lines(3) + [json.dumps({"id": "long", "text": long_text}, ensure_ascii=False)] + lines(2, start=3)
    path = write(tmp_path / f"c.jsonl{suffix}", rows, suffix)
    read = list(iter_jsonl(path, long_lines=True, limits=ReadLimits(**tiny)))
    assert [d.id for d in read] == ["d000", "d001", "d002", "long", "d003", "d004"]
    assert isinstance(read[3].text, LongText) and str(read[3].text) == long_text and len(read[3].text) == len(long_text)
    assert [d.text for d in read if d.id != "long"] == [t for i, t in docs(path)[0] if i != "long"]
    # prepare encodes the long text from the compressed file part by part: the store of the plain file.
    limits = dataclasses.replace(SMALL_FILES, long_line_bytes=300, long_string_bytes=60, long_part_bytes=23,
                                 long_scan_block_bytes=50)
    options = dict(RUN, tokenizer="byte-bpe", limits=limits)
    prepare(path, None, tmp_path / "packed", **options)
    prepare(write(tmp_path / "c.jsonl", rows), None, tmp_path / "plain", **options)
    assert store_bytes(tmp_path / "packed") == store_bytes(tmp_path / "plain")


# -- shards, globs, formats ---------------------------------------------------------------------


def test_folder_of_jsonl_shards_plain_and_compressed_reads_in_path_order(tmp_path):
    root = tmp_path / "shards"
    write(root / "b.jsonl.gz", lines(2, start=3, ids=False), ".gz")
    write(root / "a.jsonl", lines(3, ids=False))
    write(root / "sub" / "c.jsonl.zst", lines(2, start=5, ids=False), ".zst")
    write(root / ".hidden.jsonl", ["not json"])
    assert corpus_format(root) == "jsonl"
    got, report = docs(root)
    assert [i for i, _ in got] == ["a.jsonl:000001", "a.jsonl:000002", "a.jsonl:000003", "b.jsonl.gz:000001",
                                   "b.jsonl.gz:000002", "sub/c.jsonl.zst:000001", "sub/c.jsonl.zst:000002"]
    assert [t for _, t in got] == [json.loads(r)["text"] for r in lines(7)]
    assert report.made_ids and report.documents == 7


def test_shards_share_one_id_rule_and_one_id_space(tmp_path):
    root = tmp_path / "shards"
    write(root / "a.jsonl", lines(2, ids=False))
    write(root / "b.jsonl.gz", lines(1), ".gz")
    with pytest.raises(CorpusError, match=re.escape(f'{root / "b.jsonl.gz"}:1: has "id" but line 1 of a.jsonl has '
                                                    "none, so ids are made from file and line")):
        Corpus.from_path(root)
    write(root / "a.jsonl", lines(2))
    write(root / "b.jsonl.gz", lines(1, start=1), ".gz")
    with pytest.raises(CorpusError, match=re.escape(f"{root}: duplicate id 'd001' at b.jsonl.gz line 1 "
                                                    "(first seen at a.jsonl line 2)")):
        Corpus.from_path(root)


def test_a_folder_mixing_kinds_names_two_files_and_the_override(tmp_path):
    root = tmp_path / "mixed"
    write(root / "a.jsonl.zst", lines(1), ".zst")
    pq.write_table(pa.table({"id": ["x"], "text": ["y"]}), root / "b.parquet")
    message = (f"{root}: the folder mixes JSONL and Parquet files ({root / 'a.jsonl.zst'} and {root / 'b.parquet'}); "
               "expected all JSONL (plain or compressed), all Parquet, all Arrow, or only text documents "
               f"(--corpus-format FORMAT reads every file as one format; a quoted glob such as "
               f"'{root}/**/*.jsonl.zst' reads only the shards)")
    with pytest.raises(CorpusError) as err:
        Corpus.from_path(root)
    assert str(err.value) == message
    result = run("prepare", root, "--hash-split", "1,0,0", "--tokenizer", "char", "--out", tmp_path / "o", "--quiet")
    assert result.exit_code == 2 and result.stderr == f"error: {message}\n"
    assert not (tmp_path / "o").exists()


def test_a_dataset_snapshot_with_a_readme_is_read_through_the_glob_the_error_names(tmp_path):
    root = tmp_path / "snapshot"
    (root / "data").mkdir(parents=True)
    (root / "README.md").write_text("# a dataset card\n")
    pq.write_table(pa.table({"id": ["b"], "text": ["2"]}), root / "data" / "train-00001.parquet")
    pq.write_table(pa.table({"id": ["a"], "text": ["1"]}), root / "data" / "train-00000.parquet")
    with pytest.raises(CorpusError) as err:
        Corpus.from_path(root)
    pattern = re.search(r"a quoted glob such as '([^']+)' reads only the shards", str(err.value)).group(1)
    assert pattern == f"{root}/**/*.parquet"
    assert docs(pattern)[0] == [("a", "1"), ("b", "2")]


def test_a_folder_of_other_files_stays_text_documents_and_the_format_can_be_named(tmp_path):
    root = tmp_path / "docs"
    write(root / "part-0", lines(2))
    write(root / "part-1", lines(1, start=2))
    assert corpus_format(root) == "folder"
    assert docs(root)[0][0][0] == "part-0"
    as_jsonl, _ = docs(root, corpus_format="jsonl")
    assert [i for i, _ in as_jsonl] == ["d000", "d001", "d002"]
    assert docs(root, corpus_format="jsonl")[0] == docs(write(tmp_path / "one.jsonl", lines(3)))[0]
    # A folder of .json files read as text documents when asked.
    write(tmp_path / "notes" / "a.json", ['{"x": 1}'])
    assert docs(tmp_path / "notes", corpus_format="folder")[0] == [("a.json", '{"x": 1}\n')]
    with pytest.raises(ConfigurationError, match="--corpus-format 'csv' is unknown"):
        Corpus.from_path(root, corpus_format="csv")
    out = tmp_path / "s.json"
    result = run("splits", root, "--corpus-format", "jsonl", "--hash-split", "1,0,0", "--out", out)
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["train"] == ["d000", "d001", "d002"]
    assert "--corpus-format" in run("prepare", "--help").output
    result = run("prepare", root, "--corpus-format", "jsonl", "--hash-split", "1,0,0", "--tokenizer", "char",
                 "--out", tmp_path / "o", "--quiet", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["partitions"]["train"]["documents"] == 3


def test_a_shard_read_alone_keeps_the_id_rule_its_corpus_decided(tmp_path):
    from engine.corpus import read_shards
    from engine.corpus.shards import CorpusShards

    jsonl = write(tmp_path / "b.jsonl", lines(2))
    one = CorpusShards(tmp_path, "jsonl", (jsonl,), ("b.jsonl",))
    with pytest.raises(CorpusError, match=re.escape(f'{jsonl}:1: has "id" but the corpus\'s first shard has none')):
        list(read_shards(one, made_ids=True))
    assert [d.id for b in read_shards(one, made_ids=False) for d in b] == ["d000", "d001"]
    pq.write_table(pa.table({"text": ["x", "y"]}), tmp_path / "c.parquet")
    table = CorpusShards(tmp_path, "parquet", (tmp_path / "c.parquet",), ("sub/c.parquet",))
    assert [d.id for b in read_shards(table, made_ids=True) for d in b] == ["sub/c.parquet:000000", "sub/c.parquet:000001"]
    with pytest.raises(CorpusError, match=re.escape("missing column 'id' (found: text; expected id, text)")):
        list(read_shards(table, made_ids=False))


def test_a_quoted_glob_is_shards_named_below_its_folder(tmp_path, monkeypatch):
    write(tmp_path / "data" / "x-1.jsonl.gz", lines(2, ids=False), ".gz")
    write(tmp_path / "data" / "x-0.jsonl.gz", lines(1, ids=False), ".gz")
    write(tmp_path / "data" / "other.jsonl", ["not json"])
    pattern = str(tmp_path / "data" / "x-*.jsonl.gz")
    assert corpus_format(pattern) == "jsonl"
    got, _ = docs(pattern)
    assert [i for i, _ in got] == ["x-0.jsonl.gz:000001", "x-1.jsonl.gz:000001", "x-1.jsonl.gz:000002"]
    monkeypatch.chdir(tmp_path)
    assert docs("data/x-*.jsonl.gz")[0] == got
    # Engine's own outputs below the glob's folder are no shards: a store's Parquet files are not read.
    prepare("data/x-*.jsonl.gz", None, "data/out", **dict(RUN, tokenizer="byte-bpe"))
    assert list((tmp_path / "data" / "out" / "store").rglob("*.parquet"))
    pq.write_table(pa.table({"text": ["p"]}), tmp_path / "data" / "p.parquet")
    assert docs("data/**/*.parquet")[0] == [("p.parquet:000000", "p")]
    with pytest.raises(CorpusError, match=re.escape("data/y-*.jsonl: the glob matches no file")):
        Corpus.from_path("data/y-*.jsonl")
    result = run("splits", "data/x-*.jsonl.gz", "--hash-split", "1,0,0", "--out", "s.json")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "s.json").read_text())["train"] == [i for i, _ in got]


def test_parquet_and_arrow_shards(tmp_path):
    root = tmp_path / "pq"
    root.mkdir()
    pq.write_table(pa.table({"id": ["c"], "text": ["3"]}), root / "b.parquet")
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["1", "2"]}), root / "a.parquet")
    assert docs(root)[0] == [("a", "1"), ("b", "2"), ("c", "3")]
    arrow = tmp_path / "arrow"
    arrow.mkdir()
    feather.write_feather(pa.table({"text": ["1", "2"]}), arrow / "a.arrow")
    feather.write_feather(pa.table({"text": ["3"]}), arrow / "b.feather")
    assert corpus_format(arrow) == "arrow"
    assert docs(arrow)[0] == [("a.arrow:000000", "1"), ("a.arrow:000001", "2"), ("b.feather:000000", "3")]
    shutil.copy(root / "a.parquet", arrow / "c.parquet")
    with pytest.raises(CorpusError, match=r"the folder mixes Arrow IPC and Parquet files \("):
        Corpus.from_path(arrow)


# -- nested fields ------------------------------------------------------------------------------


def test_nested_fields_in_jsonl_and_struct_columns(tmp_path):
    rows = [json.dumps({"meta": {"id": f"m{i}", "body": f"text {i}"}, "meta.body": "whole key"}) for i in range(2)]
    path = write(tmp_path / "c.jsonl.bz2", rows, ".bz2")
    assert docs(path, text_column="meta.body", id_column="meta.id")[0] == [("m0", "whole key"), ("m1", "whole key")]
    path = write(tmp_path / "d.jsonl", [json.dumps({"meta": {"id": "m0", "body": {"x": "y"}}})])
    assert docs(path, text_column="meta.body.x", id_column="meta.id")[0] == [("m0", "y")]
    with pytest.raises(CorpusError, match=re.escape(f'{path}:1: "meta.body" must be a string, got dict')):
        Corpus.from_path(path, text_column="meta.body", id_column="meta.id")
    with pytest.raises(CorpusError, match=re.escape(f'{path}:1: missing "meta.text"')):
        Corpus.from_path(path, text_column="meta.text", id_column="meta.id")

    meta = pa.array([{"id": "p0", "body": "one", "n": 1}, {"id": "p1", "body": "two", "n": 2}])
    pq.write_table(pa.table({"meta": meta}), tmp_path / "s.parquet")
    assert docs(tmp_path / "s.parquet", text_column="meta.body", id_column="meta.id")[0] == [("p0", "one"), ("p1", "two")]
    with pytest.raises(CorpusError, match=re.escape("column 'meta.n' has type int64, expected string")):
        Corpus.from_path(tmp_path / "s.parquet", text_column="meta.n")
    with pytest.raises(CorpusError, match=re.escape("missing column 'meta.x' (found: meta; expected meta.x; a dotted "
                                                    "name names a field of a struct column)")):
        Corpus.from_path(tmp_path / "s.parquet", text_column="meta.x")
    nulls = pa.array([{"id": "q0", "body": "one"}, None])
    pq.write_table(pa.table({"meta": nulls}), tmp_path / "n.parquet")
    got, report = docs(tmp_path / "n.parquet", text_column="meta.body", id_column="meta.id", skip_bad_lines=True)
    assert got == [("q0", "one")] and report.skipped_bad_lines == 1


# -- datasets save_to_disk ------------------------------------------------------------------------


def test_datasets_save_to_disk_folder_in_state_json_order(tmp_path):
    datasets = pytest.importorskip("datasets", reason="datasets is in the bench extra: pip install 'engine[bench]'")
    rows = {"url": [f"u{i}" for i in range(7)], "meta": [{"body": f"body {i}"} for i in range(7)]}
    folder = tmp_path / "ds"
    datasets.Dataset.from_dict(rows).save_to_disk(str(folder), num_shards=3)
    got, _ = docs(folder, text_column="meta.body", id_column="url")
    assert got == [(f"u{i}", f"body {i}") for i in range(7)]
    assert corpus_format(folder) == "arrow"
    state = json.loads((folder / "state.json").read_text())
    names = [f["filename"] for f in state["_data_files"]]
    assert len(names) == 3
    state["_data_files"].reverse()  # the order is state.json's, not the files' names
    (folder / "state.json").write_text(json.dumps(state))
    shard_ids = [[r["url"] for r in pa.ipc.open_stream(pa.memory_map(str(folder / n))).read_all().to_pylist()]
                 for n in names]
    assert [i for ids in shard_ids for i in ids] == [i for i, _ in got]
    reversed_ids = [i for i, _ in docs(folder, text_column="meta.body", id_column="url")[0]]
    assert reversed_ids == [i for ids in reversed(shard_ids) for i in ids]
    made, _ = docs(folder, text_column="meta.body")
    assert made[0][0] == f"{names[-1]}:000000"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(CorpusError, match=re.escape("a DatasetDict folder (dataset_dict.json) holds one dataset per "
                                                    "split (train); expected one dataset")):
        Corpus.from_path(tmp_path / "dd")


# -- one store whatever carries the documents -------------------------------------------------------


def store_bytes(out):
    store = out / "store"
    return {p.relative_to(store).as_posix(): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def test_every_form_of_the_same_documents_gives_the_same_store_bytes(tmp_path):
    rows = lines(40)
    forms = {"plain": write(tmp_path / "plain" / "c.jsonl", rows)}
    for suffix in sorted(COMPRESS):
        forms[suffix] = write(tmp_path / suffix.strip(".") / f"c.jsonl{suffix}", rows, suffix)
    forms["json.gz"] = write(tmp_path / "jsongz" / "c.json.gz", rows, ".gz")
    for k in range(4):  # zstd shards of 13, 13, 13 and 1 lines
        write(tmp_path / "zst-shards" / f"part-{k:02d}.jsonl.zst", rows[13 * k:13 * (k + 1)], ".zst")
        write(tmp_path / "gz-shards" / f"part-{k:02d}.jsonl.gz", rows[13 * k:13 * (k + 1)], ".gz")
    forms["zstd shards"] = tmp_path / "zst-shards"
    forms["gzip glob"] = str(tmp_path / "gz-shards" / "part-*.jsonl.gz")
    results = {name: prepare(path, None, tmp_path / "out" / name.replace(" ", "-"), **RUN) for name, path in forms.items()}
    reference = store_bytes(tmp_path / "out" / "plain")
    assert len([name for name in reference if name.endswith(".parquet")]) >= 6 and "_engine.json" in reference
    for name in forms:
        assert store_bytes(tmp_path / "out" / name.replace(" ", "-")) == reference, name
        assert results[name].report["partitions"] == results["plain"].report["partitions"]
        assert (results[name].tokenizer_path.read_bytes() == results["plain"].tokenizer_path.read_bytes())


def test_a_manifest_and_outputs_inside_a_folder_of_shards_are_no_shards(tmp_path):
    root = tmp_path / "shards"
    write(root / "a.jsonl.gz", lines(3), ".gz")
    write(root / "b.jsonl.gz", lines(2, start=3), ".gz")
    splits = root / "splits.json"
    splits.write_text(json.dumps({"train": ["d000", "d001", "d003"], "validation": ["d002"], "test": ["d004"]}))
    options = dict(RUN, hash_split=None, tokenizer="byte-bpe", merges=20)
    first = prepare(root, splits, root / "out", **options)
    again = prepare(root, splits, root / "out2", **options)  # root/out is a prepare output now: left out
    assert first.report["partitions"]["train"]["documents"] == 3
    assert store_bytes(root / "out") == store_bytes(root / "out2")
    assert again.report["read"]["documents"] == 5


def test_resume_over_a_compressed_corpus_equals_a_fresh_run(tmp_path, monkeypatch):
    from tests.test_resume import interrupt_after

    path = write(tmp_path / "c.jsonl.zst", lines(40), ".zst")
    options = dict(RUN, tokenizer="char", merges=None)
    prepare(path, None, tmp_path / "fresh", **options)
    restore = interrupt_after(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt):
        prepare(path, None, tmp_path / "out", **options)
    restore()
    resumed = prepare(path, None, tmp_path / "out", resume=True, **options)
    assert resumed.report["resume"]["kept"]["train"]["files"] > 0
    assert store_bytes(tmp_path / "out") == store_bytes(tmp_path / "fresh")


def test_open_corpus_reports_and_batches_a_compressed_corpus(tmp_path):
    path = write(tmp_path / "c.jsonl.xz", lines(12), ".xz")
    report = ReadReport()
    batches = list(open_corpus(path, batch_documents=5, report=report))
    assert [len(b) for b in batches] == [5, 5, 2] and report.documents == 12 and report.source == str(path)
