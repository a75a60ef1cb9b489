"""Streaming prepare: fitting from batches equals fitting on the whole text, the store equals the
in-memory encoding document for document, output is byte-identical for 1, 2 and 3 threads, and
the manifest rules still hold when the corpus is only streamed."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Corpus, Partition, SplitManifest
from engine.errors import CorpusError
from engine.tokenizers.type_table import TypeCounts, count_types
from engine.pipeline import PrepareLimits, default_corpus_paths, iter_corpus_batches, prepare
from engine.store import TokenStore
from engine.tokenizers import BpeTrainer, CharTokenizer, WordTokenizer
from engine.tokenizers.base import FitOptions, trainer_for
from engine.tokenizers.loading import load_tokenizer
from engine.tokenizers.word import count_word_types


def streaming_fit(kind, batches, *, merges=60, threads=1, unknown="<unk>"):
    """What prepare's pass 1 and fit do: count each batch on threads, fold in order, fit."""
    trainer = trainer_for(kind, FitOptions(merges=merges, unknown=unknown))
    table = count_types(trainer, batches, threads)
    return trainer.train_from_counts(table.types(), table.counts())


@pytest.fixture(scope="module")
def bundled():
    corpus_path, splits_path = default_corpus_paths()
    corpus = Corpus.from_jsonl(corpus_path)
    parts = SplitManifest.from_json(splits_path).partition(corpus)
    return corpus_path, splits_path, parts


# Many reader batches and encode chunks, so every boundary is crossed on the small corpus.
SMALL_CHUNKS = PrepareLimits(read_batch_documents=5, encode_chunk_documents=3, encode_chunk_chars=4000,
                             store_row_group_rows=2)


def batches_of(texts, size):
    return [texts[i : i + size] for i in range(0, len(texts), size)]


@pytest.mark.parametrize("batch", [1, 4, 1000])
def test_streaming_fit_equals_whole_text_fit(bundled, batch):
    _, _, parts = bundled
    train = [d.text for d in parts.documents(Partition.TRAIN)]
    expected = {
        "char": CharTokenizer.fit(train),
        "word": WordTokenizer.fit(train, unknown="<unk>"),
        "bpe": BpeTrainer(60).train(train),
    }
    for kind, tok in expected.items():
        for threads in (1, 2):
            fitted = streaming_fit(kind, batches_of(train, batch), merges=60, threads=threads)
            assert fitted.hash == tok.hash, (kind, batch, threads)
    assert len(expected["bpe"].merges) == 60


def test_word_type_counts_rank_by_first_appearance():
    table = TypeCounts()
    table.add(*count_word_types(["b a", "c"]))
    table.add(*count_word_types(["a d b"]))
    assert table.types() == ["b", " ", "a", "c", "d"]
    assert table.counts().tolist() == [2, 3, 2, 1, 1]


def test_bpe_streaming_ties_follow_first_appearance():
    # "xy" and "yz" both occur twice; "yz" appears first in the stream, in a later batch than "q".
    texts = [["q"], ["yz yz"], ["xy xy"]]
    tok = streaming_fit("bpe", texts, merges=1)
    assert tok.merges == [("y", "z")]
    assert tok.hash == BpeTrainer(1).train(["q", "yz yz", "xy xy"]).hash


def test_store_equals_in_memory_encoding(bundled, tmp_path):
    corpus_path, splits_path, parts = bundled
    result = prepare(corpus_path, splits_path, tmp_path / "o", tokenizer="bpe", merges=40, context_length=8,
                     threads=2, limits=SMALL_CHUNKS, quiet=True)
    tok = load_tokenizer(result.tokenizer_path)
    assert tok.hash == BpeTrainer(40).train([d.text for d in parts.documents(Partition.TRAIN)]).hash
    store = TokenStore.open(result.store_path, tokenizer=tok)
    for part in Partition:
        docs = parts.documents(part)
        assert store.ids(part) == [d.id for d in docs]  # corpus order inside each partition
        for enc, doc in zip(store.documents(part), docs):
            np.testing.assert_array_equal(enc.tokens, tok.encode_document(doc.text, doc.id))
        row = result.report["partitions"][part.value]
        assert row["documents"] == len(docs)
        assert row["characters"] == sum(len(d.text) for d in docs)
        assert row["tokens"] == store.num_tokens(part)
        lengths = [len(tok.encode_document(d.text)) for d in docs]
        assert row["windows"] == sum(max(0, n - 9 + 1) for n in lengths)


def store_fingerprint(path):
    """Everything that must not depend on threads: file bytes (sha256), tables, tokenizer hash."""
    manifest = json.loads((path / "_engine.json").read_text())
    tables = {
        split: [pq.read_table(path / f["name"]) for f in info["files"]] for split, info in manifest["splits"].items()
    }
    return manifest, tables


@pytest.mark.parametrize("kind", ["char", "word", "bpe"])
def test_output_is_identical_for_1_2_3_threads(bundled, tmp_path, kind):
    corpus_path, splits_path, _ = bundled
    runs = []
    for threads in (1, 2, 3):
        result = prepare(corpus_path, splits_path, tmp_path / f"t{threads}", tokenizer=kind, merges=30,
                         context_length=8, threads=threads, limits=SMALL_CHUNKS, quiet=True)
        runs.append((result, store_fingerprint(result.store_path)))
    (first, (manifest, tables)), others = runs[0], runs[1:]
    assert sum(len(f["files"]) for f in manifest["splits"].values()) == 3
    assert pq.ParquetFile(first.store_path / manifest["splits"]["train"]["files"][0]["name"]).num_row_groups > 5
    for result, (other_manifest, other_tables) in others:
        assert other_manifest == manifest  # includes every file's sha256: byte-identical Parquet
        for split in tables:
            assert all(a.equals(b) for a, b in zip(tables[split], other_tables[split]))
        assert result.report["tokenizer"]["hash"] == first.report["tokenizer"]["hash"]
        assert result.report["partitions"] == first.report["partitions"]


def test_tokenizer_file_single_pass_matches_two_passes(bundled, tmp_path):
    corpus_path, splits_path, _ = bundled
    fitted = prepare(corpus_path, splits_path, tmp_path / "a", tokenizer="char", threads=2, limits=SMALL_CHUNKS,
                     quiet=True)
    loaded = prepare(corpus_path, splits_path, tmp_path / "b", tokenizer=str(fitted.tokenizer_path), threads=2,
                     limits=SMALL_CHUNKS, quiet=True)
    assert store_fingerprint(fitted.store_path)[0] == store_fingerprint(loaded.store_path)[0]


def write_corpus(path, ids):
    path.write_text("".join(json.dumps({"id": i, "text": f"text of {i}"}) + "\n" for i in ids), encoding="utf-8")


@pytest.mark.parametrize("tokenizer", ["char", "file"])
def test_manifest_rules_hold_when_streaming(tmp_path, tokenizer):
    src = tmp_path / "c.jsonl"
    write_corpus(src, ["a", "b", "c"])
    tok_arg = "char"
    if tokenizer == "file":
        tok_arg = str(CharTokenizer.fit("text ofabcxyz").save(tmp_path / "tok.json"))
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"train": ["a", "b", "c", "zz"]}))
    with pytest.raises(CorpusError, match=r"id 'zz' in \"train\" \(line 1\) is not in the corpus"):
        prepare(src, unknown, tmp_path / "o", tokenizer=tok_arg, quiet=True)
    forgotten = tmp_path / "forgotten.json"
    forgotten.write_text(json.dumps({"train": ["a"], "test": ["c"]}))
    with pytest.raises(CorpusError, match=r"1 corpus document\(s\) in no partition: 'b'"):
        prepare(src, forgotten, tmp_path / "o", tokenizer=tok_arg, quiet=True)
    write_corpus(src, ["a", "b", "a"])
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps({"train": ["a", "b"]}))
    with pytest.raises(CorpusError, match=r"duplicate id 'a' at line 3 \(first seen at line 1\)"):
        prepare(src, whole, tmp_path / "o", tokenizer=tok_arg, quiet=True)
    assert not (tmp_path / "o" / "store").exists()


def test_reader_batches_are_bounded_and_ordered(bundled):
    corpus_path, _, _ = bundled
    batches = list(iter_corpus_batches(corpus_path, batch_documents=4, batch_chars=3000))
    assert [d.id for b in batches for d in b] == Corpus.from_jsonl(corpus_path).ids()
    assert all(len(b) <= 4 and (len(b) == 1 or sum(len(d.text) for d in b) <= 3000) for b in batches)


def test_parquet_and_folder_stream_like_jsonl(bundled, tmp_path):
    import pyarrow as pa

    corpus_path, _, _ = bundled
    docs = list(Corpus.from_jsonl(corpus_path))
    pq.write_table(pa.table({"id": [d.id for d in docs], "text": [d.text for d in docs]}), tmp_path / "c.parquet")
    assert [d.id for b in iter_corpus_batches(tmp_path / "c.parquet", batch_documents=7) for d in b] == [d.id for d in docs]
    folder = tmp_path / "f"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.txt").write_text("bee")
    (folder / "sub" / "a.txt").write_text("ay")
    assert [(d.id, d.text) for b in iter_corpus_batches(folder) for d in b] == [("b.txt", "bee"), ("sub/a.txt", "ay")]


def test_cli_threads_and_progress(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(main, ["prepare", "--threads", "0", "--out", str(tmp_path / "o")])
    assert bad.exit_code == 2 and "--threads is 0" in bad.output
    ok = runner.invoke(main, ["prepare", "--tokenizer", "char", "--threads", "2", "--json", "--quiet",
                              "--out", str(tmp_path / "o")])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["threads"] == 2
    wrong = runner.invoke(main, ["prepare", "--ray-address", "auto", "--out", str(tmp_path / "o")])
    assert wrong.exit_code == 2 and "--executor ray" in wrong.output


def test_ray_executor_without_ray_says_how_to_install(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    result = CliRunner().invoke(main, ["prepare", "--executor", "ray", "--tokenizer", "char", "--quiet",
                                       "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "pip install 'engine[distributed]'" in result.output and "Traceback" not in result.output
