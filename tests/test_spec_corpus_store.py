"""Review checks of corpus splits, manifest errors and the store layout against SPEC §2 and §4."""

import json

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from engine.corpus import Corpus, CorpusPartitions, SplitManifest
from engine.errors import CorpusError
from engine.pipeline import prepare
from engine.store import TokenStore


@pytest.mark.parametrize("fraction, cut", [(0.29, 29), (0.57, 57), (0.58, 58), (0.9, 90), (0.7, 70)])
def test_text_split_cuts_the_exact_share_of_characters(fraction, cut):
    # 0.29 * 100 is 28.999999999999996 in floats: a float product would cut at 28.
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    parts = CorpusPartitions.from_text(text, fraction)
    assert parts.documents("train")[0].text == text[:cut]
    assert parts.documents("validation")[0].text == text[cut:]


def test_prepare_continuous_text_cuts_the_exact_share(tmp_path):
    (tmp_path / "play.txt").write_text("ab" * 50, encoding="utf-8")
    prepare(tmp_path / "play.txt", out_dir=tmp_path / "out", tokenizer="char", train_fraction=0.29,
            context_length=2, quiet=True, threads=1)
    store = TokenStore.open(tmp_path / "out" / "store")
    # vocabulary: BOS 0, EOS 1, "a" 2, "b" 3; 29 training characters "abab...a"
    assert store.documents("train")[0].tokens.tolist() == [0] + [2, 3] * 14 + [2] + [1]
    assert store.documents("validation")[0].tokens.tolist() == [0] + [3] + [2, 3] * 35 + [1]


def _small_corpus(tmp_path):
    (tmp_path / "c.jsonl").write_text(
        '{"id": "a", "text": "hello world"}\n{"id": "b", "text": ""}\n{"id": "c", "text": "low"}\n', encoding="utf-8")
    return tmp_path / "c.jsonl"


def test_store_directory_reads_as_one_parquet_dataset_partitioned_by_split(tmp_path):
    corpus = _small_corpus(tmp_path)
    (tmp_path / "s.json").write_text(json.dumps({"train": ["a"], "validation": ["b"], "test": ["c"]}))
    prepare(corpus, tmp_path / "s.json", tmp_path / "out", tokenizer="char", context_length=2, quiet=True, threads=1)
    root = tmp_path / "out" / "store"
    table = ds.dataset(root, format="parquet", partitioning="hive").to_table()
    rows = sorted(zip(table.column("split").to_pylist(), table.column("id").to_pylist(),
                      table.column("tokens").to_pylist()))
    # char vocabulary of "hello world": " " 2, d 3, e 4, h 5, l 6, o 7, r 8, w 9; empty text -> [BOS, EOS]
    assert rows == [
        ("test", "c", [0, 6, 7, 9, 1]),
        ("train", "a", [0, 5, 4, 6, 6, 7, 2, 9, 7, 8, 6, 3, 1]),
        ("validation", "b", [0, 1]),
    ]
    assert pq.read_table(root).num_rows == 3
    store = TokenStore.open(root)
    assert store.tokenizer().hash == store.tokenizer_hash


def test_manifest_empty_id_names_its_line(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{\n  "train": [\n    "a",\n    ""\n  ]\n}\n')
    with pytest.raises(CorpusError) as err:
        SplitManifest.from_json(path)
    assert str(err.value) == f'{path}: "train"[1] is an empty id (line 4) (expected a non-empty string)'


def test_forgotten_document_names_corpus_file_and_line(tmp_path):
    corpus = _small_corpus(tmp_path)
    manifest = tmp_path / "s.json"
    manifest.write_text(json.dumps({"train": ["a"], "validation": ["b"]}))
    expected = (f"{manifest}: 1 corpus document(s) in no partition: 'c' (corpus {corpus}, line 3); "
                "the manifest must name every document")
    with pytest.raises(CorpusError) as err:
        SplitManifest.from_json(manifest).partition(Corpus.from_jsonl(corpus))
    assert str(err.value) == expected
    with pytest.raises(CorpusError) as err:
        prepare(corpus, manifest, tmp_path / "out", tokenizer="char", quiet=True, threads=1)
    assert str(err.value) == expected
    assert not (tmp_path / "out" / "store").exists()
