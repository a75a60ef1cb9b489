"""prepare's one path: PrepareOptions checked once, byte-level BPE fitted inside the two-pass run,
the manifest checked before anything is fitted, unknown input named with its partition, and a new
tokenizer kind that needs nothing from the pipeline but its registration."""

import dataclasses
import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Corpus, Partition, SplitManifest
from engine.errors import ConfigurationError, CorpusError, TokenizerError
from engine.pipeline import PrepareLimits, PrepareOptions, default_corpus_paths, prepare
from engine.store import TokenStore
from engine.tokenizers import CharTokenizer, WordTokenizer, base, registry
from engine.tokenizers.loading import load_tokenizer
from engine.tokenizers.byte_bpe import ByteBpeTrainer
from engine.tokenizers.char import CharTrainer

HASH_SPLIT = {"train": 0.8, "validation": 0.1, "test": 0.1}
SYLLABLES = ["ka", "mi", "ro", "tu", "sen", "lo", "qu", "é", "ï", "ü", "中", "文", "字", "🙂", "'s", "'ll", "20", "7",
             "x", "Ω", "th", "ng", "ch", "st", "ar", "el", "on", "in"]
SEPARATORS = [" ", " ", " ", " ", "  ", "\n", ", ", ". ", "! ", " -- ", "\t"]


def generated_text(rng, words):
    return "".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randrange(1, 5))) + rng.choice(SEPARATORS)
                   for _ in range(words))


def write_jsonl(path, docs):
    path.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in docs),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """60 documents of made-up words in mixed scripts, digits, contractions and whitespace runs (seeded)."""
    rng = random.Random(12)
    docs = [(f"doc{i:03d}", generated_text(rng, rng.randrange(0, 150))) for i in range(60)]
    return write_jsonl(tmp_path_factory.mktemp("gen") / "corpus.jsonl", docs)


# Many read batches, encode chunks and row groups on 60 documents.
SMALL_CHUNKS = PrepareLimits(read_batch_documents=7, encode_chunk_documents=4, store_row_group_rows=2)


def partitions_of(corpus_path, manifest):
    return manifest.partition(Corpus.from_path(corpus_path))


def assert_store_is(result, tok, parts):
    """Every document of every partition, in corpus order, is ``tok.encode_document`` of its text."""
    assert result.report["tokenizer"]["hash"] == tok.hash
    store = TokenStore.open(result.store_path, tokenizer=load_tokenizer(result.tokenizer_path))
    for part in Partition:
        docs = parts.documents(part)
        assert store.ids(part) == [d.id for d in docs]
        for stored, doc in zip(store.documents(part), docs):
            np.testing.assert_array_equal(stored.tokens, tok.encode_document(doc.text))
        assert result.report["partitions"][part.value]["tokens"] == sum(len(tok.encode_document(d.text)) for d in docs)


# -- byte-level BPE inside prepare ---------------------------------------------------------------


@pytest.mark.parametrize("pattern, tie_break", [("gpt2", "first"), ("cl100k", "hf")])
def test_byte_bpe_prepare_equals_the_trainer_by_hand(generated, tmp_path, pattern, tie_break):
    result = prepare(generated, None, tmp_path / "o", tokenizer="byte-bpe", vocab_size=400, pattern=pattern,
                     tie_break=tie_break, hash_split=HASH_SPLIT, context_length=8, threads=2, limits=SMALL_CHUNKS,
                     quiet=True)
    parts = partitions_of(generated, SplitManifest.by_hash(HASH_SPLIT))
    assert [len(parts.documents(p)) for p in Partition] == [51, 4, 5]
    by_hand = ByteBpeTrainer(vocab_size=400, pattern=pattern, tie_break=tie_break).train(
        [d.text for d in parts.documents(Partition.TRAIN)])
    assert by_hand.vocab_size == 400
    assert result.report["tokenizer"]["kind"] == "bpe-byte" and result.report["tokenizer"]["vocab_size"] == 400
    assert_store_is(result, by_hand, parts)


def test_byte_bpe_prepare_on_the_bundled_corpus(tmp_path):
    corpus_path, splits_path = default_corpus_paths()
    result = prepare(corpus_path, splits_path, tmp_path / "o", tokenizer="byte-bpe", vocab_size=400, context_length=8,
                     threads=2, quiet=True)
    parts = partitions_of(corpus_path, SplitManifest.from_json(splits_path))
    by_hand = ByteBpeTrainer(vocab_size=400).train([d.text for d in parts.documents(Partition.TRAIN)])
    assert_store_is(result, by_hand, parts)


def test_byte_bpe_stores_are_byte_identical_for_1_and_2_threads(generated, tmp_path):
    manifests = []
    for threads in (1, 2):
        result = prepare(generated, None, tmp_path / f"t{threads}", tokenizer="byte-bpe", vocab_size=400,
                         hash_split=HASH_SPLIT, context_length=8, threads=threads, limits=SMALL_CHUNKS, quiet=True)
        manifests.append(json.loads((result.store_path / "_engine.json").read_text()))
        assert (result.tokenizer_path).read_bytes() == (tmp_path / "t1" / "tokenizer.json").read_bytes()
    assert manifests[0] == manifests[1]  # every Parquet file's sha256 included
    assert sum(len(s["files"]) for s in manifests[0]["splits"].values()) == 3


def test_cli_byte_bpe_one_command(generated, tmp_path):
    result = CliRunner().invoke(main, ["prepare", str(generated), "--hash-split", "0.8,0.1,0.1", "--tokenizer",
                                       "byte-bpe", "--vocab-size", "300", "--pattern", "cl100k", "--context", "16",
                                       "--out", str(tmp_path / "o"), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["tokenizer"]["vocab_size"] == 300 and report["tokenizer"]["kind"] == "bpe-byte"
    assert load_tokenizer(tmp_path / "o" / "tokenizer.json").pattern == "cl100k"
    assert [report["partitions"][p]["documents"] for p in ("train", "validation", "test")] == [51, 4, 5]


def test_merges_default_and_vocab_size_for_classic_bpe(generated, tmp_path):
    default = prepare(generated, None, tmp_path / "a", tokenizer="bpe", hash_split=HASH_SPLIT, quiet=True)
    assert len(load_tokenizer(default.tokenizer_path).merges) == 200
    sized = prepare(generated, None, tmp_path / "b", tokenizer="bpe", vocab_size=90, hash_split=HASH_SPLIT, quiet=True)
    assert sized.report["tokenizer"]["vocab_size"] == 90


# -- the manifest before the fit ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["char", "word", "bpe", "byte-bpe"])
def test_a_manifest_of_unknown_ids_is_named_before_fitting(tmp_path, kind):
    corpus = write_jsonl(tmp_path / "c.jsonl", [("a", "abc"), ("b", "abd"), ("c", "xyz")])
    splits = tmp_path / "s.json"
    splits.write_text(json.dumps({"train": ["zz"], "validation": ["yy"]}))
    with pytest.raises(CorpusError) as info:
        prepare(corpus, splits, tmp_path / "o", tokenizer=kind, quiet=True)
    assert str(info.value) == (f'{splits}: id \'zz\' in "train" (line 1) is not in the corpus {corpus}; '
                               "a manifest may only name corpus documents")
    assert not (tmp_path / "o").exists()


def test_an_empty_train_partition_is_named(tmp_path):
    corpus = write_jsonl(tmp_path / "c.jsonl", [("a", "abc"), ("b", "abd")])
    splits = tmp_path / "s.json"
    splits.write_text(json.dumps({"validation": ["a"], "test": ["b"]}))
    with pytest.raises(CorpusError, match=r"c\.jsonl: the train partition holds no text; nothing to fit the tokenizer on"):
        prepare(corpus, splits, tmp_path / "o", tokenizer="byte-bpe", quiet=True)


# -- unknown input, named with its partition -----------------------------------------------------

HELD_OUT = ("held-out text must not be fitted on, so instead of refitting use --tokenizer byte-bpe, "
            "which encodes any text")


@pytest.fixture
def abc_corpus(tmp_path):
    return write_jsonl(tmp_path / "c.jsonl", [("a", "abc"), ("b", "abd"), ("c", "xyz")])


def manifest_file(tmp_path, **lists):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(lists))
    return path


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_unknown_character_in_validation_suggests_byte_bpe(tmp_path, abc_corpus, kind):
    splits = manifest_file(tmp_path, train=["a"], validation=["b"], test=["c"])
    with pytest.raises(TokenizerError) as info:
        prepare(abc_corpus, splits, tmp_path / "o", tokenizer=kind, merges=2, threads=1, quiet=True)
    assert str(info.value) == (f"character 'd' (U+0064) at offset 2 of document 'b' (validation partition) is not "
                               f"in the {kind} tokenizer's vocabulary (expected one of its training characters); "
                               + HELD_OUT)
    assert "refit on" not in str(info.value)
    assert not (tmp_path / "o" / "store").exists()


def test_unknown_character_in_test_from_a_word_tokenizer_file(tmp_path, abc_corpus):
    tok_path = WordTokenizer.fit("abc abd").save(tmp_path / "word.json")
    splits = manifest_file(tmp_path, train=["a", "b"], test=["c"])
    with pytest.raises(TokenizerError) as info:
        prepare(abc_corpus, splits, tmp_path / "o", tokenizer=str(tok_path), threads=1, quiet=True)
    assert str(info.value) == ("character 'x' (U+0078) at offset 0 of document 'c' (test partition) is not in the "
                               "word tokenizer's vocabulary (expected characters of its training text); " + HELD_OUT)


def test_unknown_character_in_train_from_a_tokenizer_file_may_refit(tmp_path, abc_corpus):
    tok_path = CharTokenizer.fit("abdxyz").save(tmp_path / "char.json")
    splits = manifest_file(tmp_path, train=["a"], validation=["b", "c"])
    with pytest.raises(TokenizerError) as info:
        prepare(abc_corpus, splits, tmp_path / "o", tokenizer=str(tok_path), threads=1, quiet=True)
    assert str(info.value) == ("character 'c' (U+0063) at offset 2 of document 'a' (train partition) is not in the "
                               "char tokenizer's vocabulary (expected one of its training characters; refit on text "
                               "that contains it, or use --tokenizer byte-bpe)")


def test_cli_unknown_character_is_one_line_and_byte_bpe_encodes_it(tmp_path, abc_corpus):
    splits = manifest_file(tmp_path, train=["a"], validation=["b"], test=["c"])
    args = ["prepare", str(abc_corpus), "--splits", str(splits), "--out", str(tmp_path / "o"), "--quiet"]
    failed = CliRunner().invoke(main, args + ["--tokenizer", "char"])
    assert failed.exit_code == 2
    assert failed.output.strip().splitlines() == [
        "error: character 'd' (U+0064) at offset 2 of document 'b' (validation partition) is not in the char "
        "tokenizer's vocabulary (expected one of its training characters); " + HELD_OUT]
    fixed = CliRunner().invoke(main, args + ["--tokenizer", "byte-bpe", "--merges", "2", "--json"])
    assert fixed.exit_code == 0, fixed.output
    tok = load_tokenizer(tmp_path / "o" / "tokenizer.json")
    store = TokenStore.open(tmp_path / "o" / "store", tokenizer=tok)
    assert [tok.decode(d.tokens) for p in Partition for d in store.documents(p)] == ["abc", "abd", "xyz"]


# -- options, checked once ------------------------------------------------------------------------


@pytest.mark.parametrize("keywords, error, message", [
    ({"tokenizer": "char", "vocab_size": 300}, ConfigurationError, "--vocab-size applies to --tokenizer bpe, byte-bpe, not char"),
    ({"tokenizer": "bpe", "pattern": "cl100k"}, ConfigurationError, "--pattern applies to --tokenizer byte-bpe, not bpe"),
    ({"tokenizer": "word", "tie_break": "hf"}, ConfigurationError, "--tie-break applies to --tokenizer bpe, byte-bpe, not word"),
    ({"tokenizer": "byte-bpe", "vocab_size": 100}, TokenizerError,
     "vocab_size=100 is smaller than the 2 specials plus 256 bytes (expected >= 258)"),
    ({"tokenizer": "bpe", "merges": 5, "vocab_size": 90}, ConfigurationError,
     "character-level BPE trainer: give merges=N or vocab_size=V, not both"),
    ({"tokenizer": "byte-bpe", "merges": "5"}, ConfigurationError, "--merges must be a whole number, got str '5'"),
    ({"tokenizer": "byte-bpe", "merges": 2.5}, ConfigurationError, "--merges must be a whole number, got float 2.5"),
    ({"tokenizer": "byte-bpe", "vocab_size": -1}, ConfigurationError,
     "--vocab-size must be 0..16777216 (a vocabulary holds at most 16777216 ids), got -1"),
    ({"tokenizer": "byte-bpe", "pattern": "gpt4"}, ConfigurationError, "--pattern 'gpt4' is unknown (expected one of: "
                                                                       "gpt2, cl100k, o200k, llama3, qwen2, tekken, or a "
                                                                       "regex; a bare word is "
                                                                       "taken for a misspelt name)"),
    ({"tokenizer": "byte-bpe", "tie_break": "last"}, ConfigurationError, "--tie-break 'last' is unknown (expected one "
                                                                         "of: first, hf)"),
    ({"tokenizer": "sentencepiece"}, ConfigurationError,
     "--tokenizer 'sentencepiece': expected one of char, word, bpe, byte-bpe or an existing tokenizer file"),
    ({"executor": "spark"}, ConfigurationError, "--executor 'spark' is unknown (expected one of: local, ray)"),
    ({"resume": True, "executor": "ray"}, ConfigurationError, "--resume applies to --executor local only"),
    ({"ray_address": "auto"}, ConfigurationError, "--ray-address applies to --executor ray only"),
    ({"corpus_format": "csv"}, ConfigurationError,
     "--corpus-format 'csv' is unknown (expected one of: jsonl, parquet, arrow, folder)"),
    ({"on_invalid_utf8": "ignore"}, ConfigurationError, "--on-invalid-utf8 'ignore' is unknown (expected one of: "
                                                        "error, replace, skip)"),
    ({"threads": 0}, ConfigurationError, "--threads is 0; expected a whole number of threads >= 1"),
])
def test_options_are_refused_before_the_corpus_is_read(tmp_path, keywords, error, message):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("not json at all\n")  # reading it would be a CorpusError
    with pytest.raises(error) as info:
        PrepareOptions(corpus, hash_split=HASH_SPLIT, out_dir=tmp_path / "o", **keywords)
    assert str(info.value) == message
    assert not (tmp_path / "o").exists()


def test_options_for_a_tokenizer_file(tmp_path, abc_corpus):
    tok_path = CharTokenizer.fit("abcdxyz").save(tmp_path / "char.json")
    with pytest.raises(ConfigurationError) as info:
        PrepareOptions(abc_corpus, tokenizer=str(tok_path), vocab_size=300, hash_split=HASH_SPLIT)
    assert str(info.value) == ("--vocab-size applies when prepare fits a tokenizer (--tokenizer char, word, bpe, "
                               "byte-bpe), not to a tokenizer file")
    options = PrepareOptions(abc_corpus, tokenizer=str(tok_path), hash_split=HASH_SPLIT, merges=7)
    assert options.fit is None and options.load_tokenizer() == load_tokenizer(tok_path)


def test_options_are_frozen_and_resolved(tmp_path, abc_corpus):
    options = PrepareOptions(abc_corpus, out_dir=str(tmp_path / "o"), tokenizer="byte-bpe", vocab_size=300,
                             hash_split=HASH_SPLIT)
    assert options.out_dir == tmp_path / "o" and options.store_path == tmp_path / "o" / "store"
    assert options.fit == base.FitOptions(vocab_size=300, unknown="<unk>")
    assert options.continuous is False
    trainer = options.trainer()
    assert (trainer.merges, trainer.vocab_size, trainer.pattern, trainer.tie_break) == (None, 300, "gpt2", "first")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.tokenizer = "char"
    bundled = PrepareOptions()
    assert (bundled.corpus, bundled.splits) == default_corpus_paths()
    assert PrepareOptions(tokenizer="bpe").trainer().merges == 200


# -- a new kind: one module and its registration --------------------------------------------------


class ShoutTrainer(CharTrainer):
    def train_from_counts(self, types, counts):
        return ShoutTokenizer("".join(sorted(set("".join(types).upper()) | set("".join(types)))))


class ShoutTokenizer(CharTokenizer):
    """A kind only this test knows: characters and their capitals; encoding is serialised."""

    kind = "test-shout"
    fit_name = "shout"
    thread_safe_encode = False

    @classmethod
    def trainer(cls, options):
        return ShoutTrainer()


def test_a_registered_kind_runs_through_prepare_untouched(tmp_path, abc_corpus, monkeypatch):
    for table, key in ((registry._REGISTRY, ShoutTokenizer.kind), (registry._FITTABLE, ShoutTokenizer.fit_name)):
        monkeypatch.setitem(table, key, None)  # removed again after the test
    monkeypatch.setattr(registry, "KIND_MODULES", registry.KIND_MODULES + (__name__,))  # the one registry line
    registry.register_tokenizer(ShoutTokenizer)
    assert registry.fittable_kinds() == ("char", "word", "bpe", "byte-bpe", "shout")
    splits = manifest_file(tmp_path, train=["a", "b", "c"])
    result = prepare(abc_corpus, splits, tmp_path / "o", tokenizer="shout", context_length=2, threads=2, quiet=True)
    tok = load_tokenizer(result.tokenizer_path)
    assert isinstance(tok, ShoutTokenizer) and tok.alphabet == "ABCDXYZabcdxyz"
    store = TokenStore.open(result.store_path, tokenizer=tok)
    assert [tok.decode(d.tokens) for d in store.documents(Partition.TRAIN)] == ["abc", "abd", "xyz"]
    with pytest.raises(ConfigurationError) as info:
        PrepareOptions(abc_corpus, splits, tokenizer="shout", vocab_size=10)
    assert str(info.value) == "--vocab-size applies to --tokenizer bpe, byte-bpe, not shout"


def test_prepare_continuous_text_cuts_the_exact_share(tmp_path):
    (tmp_path / "play.txt").write_text("ab" * 50, encoding="utf-8")
    prepare(tmp_path / "play.txt", out_dir=tmp_path / "out", tokenizer="char", train_fraction=0.29,
            context_length=2, quiet=True, threads=1)
    store = TokenStore.open(tmp_path / "out" / "store")
    # vocabulary: BOS 0, EOS 1, "a" 2, "b" 3; 29 training characters "abab...a"
    assert store.documents("train")[0].tokens.tolist() == [0] + [2, 3] * 14 + [2] + [1]
    assert store.documents("validation")[0].tokens.tolist() == [0] + [3] + [2, 3] * 35 + [1]
