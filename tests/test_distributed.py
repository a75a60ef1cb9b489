"""The Ray Data executor gives the local store, document for document and byte for byte.

Starts one local Ray instance (2 CPUs) for the module. Skipped only when Ray is not installed.
"""

import json

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

ray = pytest.importorskip("ray", reason="Ray Data is not installed: pip install 'engine[distributed]'")

from engine.cli import main  # noqa: E402
from engine.corpus import Corpus, Partition, SplitManifest  # noqa: E402
from engine.distributed import count_types, encode, prepare_on_ray  # noqa: E402
from engine.errors import CorpusError, TokenizerError  # noqa: E402
from engine.tokenizers.type_table import TypeCounts  # noqa: E402
from engine.pipeline import default_corpus_paths, prepare  # noqa: E402
from engine.store import TokenStore  # noqa: E402
from engine.tokenizers import BpeTrainer, CharTokenizer  # noqa: E402
from engine.tokenizers.byte_bpe import ByteBpeTrainer  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def train_texts():
    corpus_path, splits_path = default_corpus_paths()
    parts = SplitManifest.from_json(splits_path).partition(Corpus.from_jsonl(corpus_path))
    return [d.text for d in parts.documents(Partition.TRAIN)]


@pytest.mark.parametrize("kind, merges", [("char", 0), ("bpe", 60)])
def test_ray_store_equals_local_store(tmp_path, kind, merges):
    corpus_path, splits_path = default_corpus_paths()
    on_ray = prepare_on_ray(corpus_path, splits_path, tmp_path / "ray", tokenizer=kind, merges=merges,
                            context_length=8, quiet=True)
    local = prepare(corpus_path, splits_path, tmp_path / "local", tokenizer=kind, merges=merges,
                    context_length=8, quiet=True)
    assert on_ray.report["tokenizer"] == {**local.report["tokenizer"], "path": on_ray.report["tokenizer"]["path"]}
    assert on_ray.report["partitions"] == local.report["partitions"]
    a = TokenStore.open(on_ray.store_path)
    b = TokenStore.open(local.store_path)
    for part in Partition:
        assert a.ids(part) == b.ids(part) and len(a.ids(part)) > 0
        for x, y in zip(a.documents(part), b.documents(part)):
            np.testing.assert_array_equal(x.tokens, y.tokens)
    # Same chunking on the driver as locally: the Parquet files are byte-identical (sha256 in the manifest).
    manifest = lambda r: json.loads((r.store_path / "_engine.json").read_text())  # noqa: E731
    assert manifest(on_ray) == manifest(local)
    assert a.tokenizer().kind == kind


def test_ray_byte_bpe_store_equals_local_store(tmp_path):
    corpus_path, splits_path = default_corpus_paths()
    options = dict(tokenizer="byte-bpe", vocab_size=400, pattern="cl100k", context_length=8, quiet=True)
    on_ray = prepare_on_ray(corpus_path, splits_path, tmp_path / "ray", **options)
    local = prepare(corpus_path, splits_path, tmp_path / "local", threads=2, **options)
    parts = SplitManifest.from_json(splits_path).partition(Corpus.from_jsonl(corpus_path))
    by_hand = ByteBpeTrainer(vocab_size=400, pattern="cl100k").train([d.text for d in parts.documents(Partition.TRAIN)])
    assert on_ray.report["tokenizer"]["hash"] == local.report["tokenizer"]["hash"] == by_hand.hash
    assert on_ray.report["partitions"] == local.report["partitions"]
    manifest = lambda r: json.loads((r.store_path / "_engine.json").read_text())  # noqa: E731
    assert manifest(on_ray) == manifest(local)  # byte-identical Parquet files


@pytest.mark.parametrize("kind, limit", [("byte-bpe", 1500), ("bpe", 10 ** 6), ("word", 1)])
def test_ray_fit_sample_equals_local(tmp_path, kind, limit):
    """--fit-sample on Ray: the same sample (the start of the train partition in corpus order, the
    document that crosses the bound cut), the same tokenizer, the same report and store."""
    corpus_path, splits_path = default_corpus_paths()
    options = dict(tokenizer=kind, context_length=8, quiet=True, fit_sample=limit,
                   **({"vocab_size": 300} if kind == "byte-bpe" else {"merges": 30} if kind == "bpe" else {}))
    on_ray = prepare_on_ray(corpus_path, splits_path, tmp_path / "ray", **options)
    local = prepare(corpus_path, splits_path, tmp_path / "local", threads=2, **options)
    assert on_ray.report["fit_sample"] == local.report["fit_sample"]
    assert on_ray.report["fit_sample"]["whole_train_partition"] is (limit == 10 ** 6)
    assert on_ray.report["tokenizer"]["hash"] == local.report["tokenizer"]["hash"]
    manifest = lambda r: json.loads((r.store_path / "_engine.json").read_text())  # noqa: E731
    assert manifest(on_ray) == manifest(local)


def test_count_words_char_level_equals_local_table(train_texts):
    ds = ray.data.from_arrow(pa.table({"text": train_texts}))
    trainer = BpeTrainer(40)
    on_ray = count_types(ds.repartition(4), trainer)
    table = TypeCounts()
    table.add(*trainer.count_types(train_texts))
    assert on_ray.types() == table.types()
    assert on_ray.counts().tolist() == table.counts().tolist()
    assert trainer.train_from_counts(on_ray.types(), on_ray.counts()).hash == BpeTrainer(40).train(train_texts).hash


def test_count_words_byte_level_trains_the_byte_trainer_merges(train_texts):
    ds = ray.data.from_arrow(pa.table({"text": train_texts})).repartition(3)
    on_ray = count_types(ds, ByteBpeTrainer(merges=30, pattern="gpt2"))
    words, counts = on_ray.types(), on_ray.counts()
    local = ByteBpeTrainer(merges=30).count_words(train_texts)
    pool = local.pool.tobytes()
    assert words == [pool[local.starts[w]:local.starts[w + 1]] for w in range(local.total)]
    assert counts.tolist() == local.counts[: local.total].tolist()
    tok = ByteBpeTrainer(merges=30).train_from_counts(words, counts)
    assert tok.hash == ByteBpeTrainer(merges=30).train(train_texts).hash


def test_encode_maps_arrow_batches_to_tokens(train_texts):
    tok = CharTokenizer.fit(train_texts)
    ds = ray.data.from_arrow(pa.table({"id": ["a", "b"], "text": ["", train_texts[0][:20]], "split": ["train", "test"]}))
    out = encode(ds, tok).to_arrow_refs()
    table = pa.concat_tables(ray.get(out))
    assert table.schema.field("tokens").type == pa.large_list(pa.uint32())
    assert table.column("id").to_pylist() == ["a", "b"] and table.column("split").to_pylist() == ["train", "test"]
    rows = table.column("tokens").to_pylist()
    assert rows[0] == [0, 1]
    assert rows[1] == tok.encode_document(train_texts[0][:20]).tolist()


def test_cli_executor_ray(tmp_path):
    result = CliRunner().invoke(main, ["prepare", "--executor", "ray", "--tokenizer", "char", "--context", "8",
                                       "--json", "--quiet", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["partitions"]["train"]["documents"] == 39


def _store_files(out):
    store = out / "store"
    return {p.relative_to(store).as_posix(): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def test_ray_makes_ids_for_jsonl_without_them_as_the_local_executor_does(tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in ["abc", "abd", "xyz", "bca", "cab"] * 3),
                   encoding="utf-8")
    options = dict(tokenizer="char", context_length=2, hash_split=(0.6, 0.2, 0.2), quiet=True)
    on_ray = prepare_on_ray(src, None, tmp_path / "ray", **options)
    local = prepare(src, None, tmp_path / "local", **options)
    assert _store_files(tmp_path / "ray") == _store_files(tmp_path / "local")
    assert TokenStore.open(on_ray.store_path).ids(Partition.TRAIN)[0].startswith("c.jsonl:0000")
    assert on_ray.report["read"] == local.report["read"] and on_ray.report["read"]["ids_made_from_file_and_row"]


def test_ray_reads_compressed_shards_with_nested_fields_and_bad_lines_as_local(tmp_path):
    import gzip

    import zstandard

    rows = [json.dumps({"meta": {"key": f"k{i}", "body": "abcde"[i % 5:] + "xy"[: i % 3]}}) for i in range(24)]
    rows[5] = '{"meta": {"key": "bad"'  # malformed, skipped with --skip-bad-lines
    root = tmp_path / "shards"
    root.mkdir()
    for k in range(3):
        data = "".join(r + "\n" for r in rows[8 * k:8 * (k + 1)]).encode()
        if k == 1:
            (root / f"part-{k}.jsonl.gz").write_bytes(gzip.compress(data))
        else:
            (root / f"part-{k}.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
    options = dict(tokenizer="bpe", merges=10, context_length=2, hash_split=(0.6, 0.2, 0.2), quiet=True,
                   text_column="meta.body", id_column="meta.key", skip_bad_lines=True)
    on_ray = prepare_on_ray(root, None, tmp_path / "ray", **options)
    local = prepare(root, None, tmp_path / "local", **options)
    assert _store_files(tmp_path / "ray") == _store_files(tmp_path / "local")
    assert on_ray.report["partitions"] == local.report["partitions"]
    assert on_ray.report["read"] == local.report["read"] and on_ray.report["read"]["skipped_bad_lines"] == 1
    assert on_ray.report["read"]["documents"] == 23


def test_ray_reads_parquet_shards_with_a_struct_column_and_made_ids_as_local(tmp_path):
    import pyarrow.parquet as pq

    root = tmp_path / "pq"
    (root / "b").mkdir(parents=True)
    texts = ["abc", "abd", "xyz", "bca", "cab", "zyx", "bad", "dab"]
    pq.write_table(pa.table({"meta": [{"body": t} for t in texts[:5]]}), root / "a.parquet")
    pq.write_table(pa.table({"meta": [{"body": t} for t in texts[5:]]}), root / "b" / "c.parquet")
    options = dict(tokenizer="byte-bpe", merges=5, context_length=2, hash_split=(0.5, 0.25, 0.25), quiet=True,
                   text_column="meta.body")
    on_ray = prepare_on_ray(root, None, tmp_path / "ray", **options)
    local = prepare(root, None, tmp_path / "local", **options)
    assert _store_files(tmp_path / "ray") == _store_files(tmp_path / "local")
    assert on_ray.report["read"] == local.report["read"]
    ids = sorted(i for part in Partition for i in TokenStore.open(on_ray.store_path).ids(part))
    assert ids == sorted([f"a.parquet:{n:06d}" for n in range(5)] + [f"b/c.parquet:{n:06d}" for n in range(3)])


def test_worker_errors_come_back_as_engine_errors(tmp_path):
    # Kept last in the module: a run that fails inside a worker can leave its actor holding a CPU
    # of this 2-CPU instance for a while, so no Ray run follows it here.
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in
                           [("a", "abc"), ("b", "abd"), ("c", "xyz")]), encoding="utf-8")
    splits = tmp_path / "s.json"
    splits.write_text(json.dumps({"train": ["a", "b"], "validation": ["zz"]}))
    with pytest.raises(CorpusError, match=r"id 'zz' in \"validation\".* is not in the corpus"):
        prepare_on_ray(src, splits, tmp_path / "o", tokenizer="char", quiet=True)
    # Checked against the corpus ids before anything is fitted: not "the training text is empty".
    splits.write_text(json.dumps({"train": ["zz"]}))
    with pytest.raises(CorpusError, match=r"id 'zz' in \"train\" \(line 1\) is not in the corpus"):
        prepare_on_ray(src, splits, tmp_path / "o", tokenizer="byte-bpe", quiet=True)
    splits.write_text(json.dumps({"train": ["a", "b"]}))
    with pytest.raises(CorpusError, match=r"1 corpus document\(s\) in no partition: 'c'"):
        prepare_on_ray(src, splits, tmp_path / "o", tokenizer="char", quiet=True)
    splits.write_text(json.dumps({"train": ["a"], "validation": ["b"], "test": ["c"]}))
    with pytest.raises(TokenizerError, match=r"^character 'd' \(U\+0064\) at offset 2 of document 'b' \(validation "
                                             r"partition\)[^\n]*; held-out text must not be fitted on, so instead of "
                                             r"refitting use --tokenizer byte-bpe, which encodes any text$"):
        prepare_on_ray(src, splits, tmp_path / "o", tokenizer="char", quiet=True)
    assert not (tmp_path / "o" / "store").exists()


def test_a_failed_tokenizer_write_on_ray_changes_nothing(tmp_path, monkeypatch):
    from tests.fakes import fail_saves_into

    corpus_path, splits_path = default_corpus_paths()
    out = tmp_path / "out"
    prepare_on_ray(corpus_path, splits_path, out, tokenizer="char", context_length=8, quiet=True)
    before = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    fail_saves_into(monkeypatch, out)
    with pytest.raises(OSError, match="injected"):  # another tokenizer: every output would change
        prepare_on_ray(corpus_path, splits_path, out, tokenizer="word", context_length=4, quiet=True)
    after = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert after == before
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "store", "tokenizer.json"]


def test_ray_cuts_a_long_unbroken_piece_where_local_does(tmp_path):
    """A document with a stretch longer than ``piece_chars`` and no break in it: the Ray actors get the
    run's limits, so the stretch is cut at the same places (the store is byte-identical to local's)."""
    from engine.pipeline import PrepareLimits

    rng = np.random.default_rng(3)
    corpus = tmp_path / "c.jsonl"
    texts = {"long": "x! " + "ab" * 500 + "! y", **{f"d{i}": " ".join(rng.choice(["abab", "ab", "x!"], 20)) for i in
                                                      range(8)}}
    corpus.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in texts.items()), encoding="utf-8")
    options = dict(tokenizer="byte-bpe", merges=40, context_length=4, quiet=True,
                   hash_split={"train": 0.5, "validation": 0.25, "test": 0.25},
                   limits=PrepareLimits(stream_chars=50, piece_chars=301))
    on_ray = prepare_on_ray(corpus, None, tmp_path / "ray", **options)
    local = prepare(corpus, None, tmp_path / "local", threads=2, **options)
    whole = prepare(corpus, None, tmp_path / "whole", threads=2, **{**options, "limits": PrepareLimits()})
    manifest = lambda r: json.loads((r.store_path / "_engine.json").read_text())  # noqa: E731
    assert manifest(on_ray) == manifest(local)
    assert manifest(local) != manifest(whole)  # the cut changed the long document's ids


@pytest.mark.parametrize("bos, config_bos", [(None, None), ("none", "<|begin_of_text|>")])
def test_ray_documents_without_bos_equal_local(tmp_path, bos, config_bos):
    """A tokenizer without BOS (tokenizer_config.json's bos_token null), and --bos none dropping a
    tokenizer's BOS: on Ray as locally, [content..., EOS], byte-identical stores."""
    from tests.chat_helpers import model_folder

    folder = model_folder(tmp_path / "model", "{{ messages }}", bos=config_bos, eos="<|endoftext|>")
    corpus_path, splits_path = default_corpus_paths()
    options = dict(tokenizer=str(folder), context_length=8, quiet=True, bos=bos)
    on_ray = prepare_on_ray(corpus_path, splits_path, tmp_path / "ray", **options)
    local = prepare(corpus_path, splits_path, tmp_path / "local", **options)
    assert on_ray.report["wrappers"] == local.report["wrappers"]
    assert local.report["wrappers"]["bos"] is None and local.report["wrappers"]["bos_id"] is None
    manifest = lambda r: json.loads((r.store_path / "_engine.json").read_text())  # noqa: E731
    assert manifest(on_ray) == manifest(local)
    store = TokenStore.open(on_ray.store_path)
    tok = store.tokenizer()
    train = SplitManifest.from_json(splits_path).partition(Corpus.from_jsonl(corpus_path)).documents(Partition.TRAIN)
    assert store.bos_id is None and len(train) == len(store.ids(Partition.TRAIN))
    for doc, stored in zip(train, store.documents(Partition.TRAIN)):
        assert stored.tokens.tolist() == [*tok.encode(doc.text).tolist(), tok.eos_id]
