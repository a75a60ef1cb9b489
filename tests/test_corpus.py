"""engine.corpus.collection: Corpus, the documents in memory, and the bundled corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.corpus import Corpus, Document, Partition, SplitManifest
from engine.errors import CorpusError

ROOT = Path(__file__).resolve().parent.parent


# -- the collection ---------------------------------------------------------------------------------


def test_corpus_constructor_rejects_duplicate_and_empty_ids():
    with pytest.raises(CorpusError, match="duplicate id 'x' at documents 0 and 2"):
        Corpus([Document("x", ""), Document("y", ""), Document("x", "")])
    with pytest.raises(CorpusError, match="corpus document 1: empty or non-string id ''"):
        Corpus([Document("x", ""), Document("", "")])


# -- the bundled corpus -----------------------------------------------------------------------------


def test_bundled_corpus_and_splits():
    corpus = Corpus.from_jsonl(ROOT / "data" / "corpus.jsonl")
    parts = SplitManifest.from_json(ROOT / "data" / "splits.json").partition(corpus)
    assert len(corpus) >= 48
    texts = {d.id: d.text for d in corpus}
    assert "" in texts.values() and any(len(t) == 1 for t in texts.values())
    assert any(4000 <= len(t.encode("utf-8")) <= 6500 for t in texts.values())
    for part, docs in parts:
        assert {d.id.split("-")[0] for d in docs} == {"en", "el", "ru"}, part
    train_texts = [d.text for d in parts.documents("train")]
    assert "" in train_texts and any(len(t) == 1 for t in train_texts)
    counts = parts.counts()
    assert counts[Partition.TRAIN] / len(corpus) == pytest.approx(0.8, abs=0.05)
