"""Arrow IPC corpora (SPEC §2: "Parquet/Arrow with id and text") and manifests with a repeated key."""

import json

import pyarrow as pa
import pyarrow.feather as feather
import pytest

from engine.corpus import Corpus, SplitManifest
from engine.errors import CorpusError
from engine.pipeline import prepare


def _table():
    return pa.table({"id": ["a", "b", "c"], "text": ["x", "", "αβ"], "extra": [1, 2, 3]})


@pytest.mark.parametrize("suffix, write", [
    (".arrow", lambda t, p: feather.write_feather(t, p)),
    (".feather", lambda t, p: feather.write_feather(t, p, compression="uncompressed")),
    (".ipc", lambda t, p: _write_stream(t, p)),
])
def test_arrow_ipc_corpus_reads_like_parquet(tmp_path, suffix, write):
    path = tmp_path / f"corpus{suffix}"
    write(_table(), path)
    corpus = Corpus.from_path(path)
    assert [(d.id, d.text) for d in corpus] == [("a", "x"), ("b", ""), ("c", "αβ")]
    splits = tmp_path / "s.json"
    splits.write_text(json.dumps({"train": ["a", "c"], "validation": ["b"]}))
    report = prepare(path, splits, tmp_path / "out", tokenizer="char", context_length=1, quiet=True).report
    assert report["partitions"]["train"]["tokens"] == 3 + 4 and report["partitions"]["validation"]["tokens"] == 2


def _write_stream(table, path):
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def test_arrow_corpus_missing_column(tmp_path):
    path = tmp_path / "c.arrow"
    feather.write_feather(pa.table({"id": ["a"]}), path)
    with pytest.raises(CorpusError, match=r"c\.arrow: missing column 'text'"):
        Corpus.from_path(path)


def test_manifest_with_a_repeated_key_is_an_error(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"train": ["a"], "validation": [], "train": ["b"]}')
    with pytest.raises(CorpusError, match='key "train" appears more than once'):
        SplitManifest.from_json(path)
