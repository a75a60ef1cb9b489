"""engine.corpus.splits: split manifests, the hash split and the positional split of one text."""

import hashlib
import json

import pytest

from engine.corpus import Corpus, CorpusPartitions, Document, Partition, SplitManifest, hash_partition
from engine.errors import ConfigurationError, CorpusError
from engine.pipeline import prepare
from tests.helpers import _small_corpus


# -- split manifests -------------------------------------------------------------------------------


CORPUS = Corpus([Document(i, f"text of {i}") for i in ["a", "b", "c", "d", "e"]])


def test_manifest_partitions_in_corpus_order(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"train": ["c", "a", "e"], "validation": ["b"], "test": ["d"]}))
    parts = SplitManifest.from_json(path).partition(CORPUS)
    assert [d.id for d in parts.documents(Partition.TRAIN)] == ["a", "c", "e"]
    assert parts.ids("validation") == ["b"] and parts.ids("test") == ["d"]
    assert parts.counts() == {Partition.TRAIN: 3, Partition.VALIDATION: 1, Partition.TEST: 1}
    assert [(p, len(docs)) for p, docs in parts] == [(Partition.TRAIN, 3), (Partition.VALIDATION, 1), (Partition.TEST, 1)]


def test_manifest_missing_keys_are_empty_and_round_trip(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{"train": ["a", "b", "c", "d", "e"]}')
    manifest = SplitManifest.from_json(path)
    assert manifest.counts() == {Partition.TRAIN: 5, Partition.VALIDATION: 0, Partition.TEST: 0}
    manifest.to_json(tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text()) == {"train": list("abcde"), "validation": [], "test": []}
    assert SplitManifest.from_json(tmp_path / "again.json") == manifest


@pytest.mark.parametrize(
    "content, fragment",
    [
        ('{"train": ["a"], "dev": ["b"]}', "unknown key(s) 'dev' (expected train, validation, test)"),
        ('{"train": "a"}', '"train" must be a list of ids, got str'),
        ('{"train": ["a", 3]}', '"train"[1] must be a string id, got int 3'),
        ('{"train": ["a", ""]}', '"train"[1] is an empty id'),
        ('["a"]', "expected a JSON object"),
        ('{"train": ["a",\n', "splits.json:2: malformed JSON"),
    ],
)
def test_manifest_file_errors_name_the_file(tmp_path, content, fragment):
    path = tmp_path / "splits.json"
    path.write_text(content)
    with pytest.raises(CorpusError) as err:
        SplitManifest.from_json(path)
    assert fragment in str(err.value) and str(path) in str(err.value)


def test_manifest_id_in_two_partitions_names_id_file_and_lines(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{\n  "train": ["a", "b"],\n  "validation": ["c"],\n  "test": ["d", "b"]\n}\n')
    with pytest.raises(CorpusError) as err:
        SplitManifest.from_json(path)
    assert str(err.value) == (
        f'{path}: id \'b\' is in both "train" and "test" (lines 2 and 4); every document belongs to exactly one partition'
    )


def test_manifest_id_repeated_inside_one_list(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{"train": [\n"a",\n"b",\n"a"\n]}')
    with pytest.raises(CorpusError, match=r"id 'a' appears twice in \"train\" \(lines 2 and 4\); list each id once"):
        SplitManifest.from_json(path)
    with pytest.raises(CorpusError, match=r"^split manifest: id 'x' appears twice in \"test\"; list each id once$"):
        SplitManifest(test=["x", "x"])


def test_manifest_unknown_id_and_forgotten_documents(tmp_path):
    path = tmp_path / "splits.json"
    path.write_text('{"train": ["a", "b", "c"],\n "validation": ["zz"], "test": ["d", "e"]}')
    with pytest.raises(CorpusError) as err:
        SplitManifest.from_json(path).partition(CORPUS)
    assert str(err.value).startswith(f"{path}: id 'zz' in \"validation\" (line 2) is not in the corpus")

    big = Corpus([Document(f"doc{i}", "") for i in range(9)])
    with pytest.raises(CorpusError) as err:
        SplitManifest(train=["doc0", "doc4"]).partition(big)
    assert str(err.value) == (
        "split manifest: 7 corpus document(s) in no partition: 'doc1', 'doc2', 'doc3', 'doc5', 'doc6', ...; "
        "the manifest must name every document"
    )


# -- hash split ---------------------------------------------------------------------------------


def reference_hash_partition(doc_id: str, train: float, validation: float) -> str:
    u = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:8], "big") / 2**64
    return "train" if u < train else "validation" if u < train + validation else "test"


def test_hash_split_follows_the_documented_rule():
    ratios = {"train": 0.8, "validation": 0.1, "test": 0.1}
    ids = [f"doc-{i}" for i in range(2000)] + ["ελληνικά", "русский", "a/b.py"]
    manifest = SplitManifest.by_hash(ratios)
    for doc_id in ids:
        assert manifest.partition_of(doc_id).value == reference_hash_partition(doc_id, 0.8, 0.1)
        assert hash_partition(doc_id, ratios) is manifest.partition_of(doc_id)
    counts = manifest.assign(ids).counts()
    assert sum(counts.values()) == len(ids) and 1500 < counts[Partition.TRAIN] < 1700
    # Golden values fixed forever by the rule: u("doc-3") = 0.9407, u("doc-9") = 0.8042, u("doc-24") = 0.9016.
    golden = {"doc-0": "train", "doc-3": "test", "doc-9": "validation", "doc-15": "validation", "doc-24": "test"}
    assert {i: manifest.partition_of(i).value for i in golden} == golden


def test_hash_split_partitions_a_corpus_and_zero_ratios_stay_empty():
    parts = SplitManifest.by_hash({"train": 0.5, "test": 0.5}).partition(CORPUS)
    assert parts.counts()[Partition.VALIDATION] == 0
    assert sorted(parts.ids("train") + parts.ids("test")) == ["a", "b", "c", "d", "e"]
    only_train = SplitManifest.by_hash({"train": 1.0})
    assert {only_train.partition_of(f"x{i}") for i in range(500)} == {Partition.TRAIN}


@pytest.mark.parametrize(
    "ratios, fragment",
    [
        ({"train": 0.8, "validation": 0.1}, "split ratios sum to 0.9"),
        ({"train": 1.1, "test": -0.1}, "split ratio for 'test' is -0.1, expected a finite number >= 0"),
        ({"train": 0.9, "dev": 0.1}, "split ratio key 'dev' is not a partition"),
        ({"train": float("nan")}, "split ratio for 'train' is nan"),
    ],
)
def test_hash_split_ratio_errors(ratios, fragment):
    with pytest.raises(ConfigurationError) as err:
        SplitManifest.by_hash(ratios)
    assert fragment in str(err.value)


def test_hash_split_has_no_lists_until_assigned():
    with pytest.raises(ConfigurationError, match="a hash split lists no ids"):
        SplitManifest.by_hash({"train": 1}).to_json("never.json")


# -- partitions -------------------------------------------------------------------------------


def test_from_text_cuts_by_position():
    text = "abcdefghij" * 10 + "é"  # 101 characters
    parts = CorpusPartitions.from_text(text, 0.9, name="play")
    (train,) = parts.documents("train")
    (valid,) = parts.documents(Partition.VALIDATION)
    assert train == Document("play:train", text[:90]) and valid == Document("play:validation", text[90:])
    assert train.text + valid.text == text and parts.documents("test") == []
    default = CorpusPartitions.from_text("x" * 7)
    assert [d.id for _, docs in default for d in docs] == ["text:train", "text:validation"]
    assert default.documents("train")[0].text == "x" * 6  # int(7 * 0.9) = 6
    assert CorpusPartitions.from_text("abc", 1.0).documents("validation") == [Document("text:validation", "")]
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ConfigurationError, match=f"train_fraction is {bad}"):
            CorpusPartitions.from_text("abc", bad)


def test_from_text_on_shakespeare(shakespeare_text):
    parts = CorpusPartitions.from_text(shakespeare_text, 0.9, name="shakespeare")
    cut = int(len(shakespeare_text) * 0.9)
    assert len(parts.documents("train")[0].text) == cut == 1003854
    assert parts.documents("validation")[0].text[:10] == shakespeare_text[cut : cut + 10]


def test_from_mapping_checks_partitions_and_ids():
    parts = CorpusPartitions.from_mapping({"train": [Document("a", "")], Partition.TEST: [Document("b", "")]})
    assert parts.counts() == {Partition.TRAIN: 1, Partition.VALIDATION: 0, Partition.TEST: 1}
    assert parts.manifest() == SplitManifest(train=["a"], test=["b"])
    with pytest.raises(CorpusError, match=r"id 'a' appears twice \(in \"train\" and \"validation\"\)"):
        CorpusPartitions.from_mapping({"train": [Document("a", "")], "validation": [Document("a", "")]})
    with pytest.raises(CorpusError, match=r"id 'a' appears twice \(in \"train\" and \"train\"\)"):
        CorpusPartitions.from_mapping({"train": [Document("a", ""), Document("a", "x")]})
    with pytest.raises(CorpusError, match="unknown partition 'dev'"):
        CorpusPartitions.from_mapping({"dev": []})


@pytest.mark.parametrize("fraction, cut", [(0.29, 29), (0.57, 57), (0.58, 58), (0.9, 90), (0.7, 70)])
def test_text_split_cuts_the_exact_share_of_characters(fraction, cut):
    # 0.29 * 100 is 28.999999999999996 in floats: a float product would cut at 28.
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    parts = CorpusPartitions.from_text(text, fraction)
    assert parts.documents("train")[0].text == text[:cut]
    assert parts.documents("validation")[0].text == text[cut:]


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


def test_manifest_with_a_repeated_key_is_an_error(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"train": ["a"], "validation": [], "train": ["b"]}')
    with pytest.raises(CorpusError, match='key "train" appears more than once'):
        SplitManifest.from_json(path)
