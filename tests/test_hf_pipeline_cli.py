"""tokenizer.json pipelines end to end: `engine tokenizers import` and `engine prepare --tokenizer` with a
model folder, then the store, windows, packing and the PyTorch dataset over its ids."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
from engine.corpus import Partition
from engine.pipeline import default_corpus_paths
from engine.store import TokenStore
from engine.tokenizers.loading import load_tokenizer
from engine.windows import CausalWindowConfig
from tests.helpers import run
from tests.naive_hf import build_family

pytest.importorskip("tokenizers", reason="needs the test extra (pip install -e '.[test]')")


def documents():
    corpus, splits = default_corpus_paths()
    docs = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    return corpus, splits, {d["id"]: d["text"] for d in docs}


@pytest.fixture(scope="module", params=["qwen2", "llama2"])
def prepared(request, tmp_path_factory):
    name = request.param
    hf = build_family(name, 400)
    folder = tmp_path_factory.mktemp(name) / "model"
    folder.mkdir()
    hf.save(str(folder / "tokenizer.json"))
    config = ({"bos_token": None, "eos_token": "<|endoftext|>"} if name == "qwen2" else
              {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>"})
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    corpus, splits, _ = documents()
    out = folder.parent / "out"
    result = run("prepare", corpus, "--splits", splits, "--tokenizer", folder, "--out", out, "--quiet")
    assert result.exit_code == 0, result.output
    return name, hf, folder, out, result.output


def test_prepare_stores_hugging_face_ids_wrapped_by_the_files_tokens(prepared):
    name, hf, _, out, output = prepared
    hf.encode_special_tokens = True
    _, _, texts = documents()
    # Qwen2's tokenizer_config.json says bos_token null: its documents are [content..., EOS]
    bos, eos = (None, "<|endoftext|>") if name == "qwen2" else ("<s>", "</s>")
    store = TokenStore.open(out / "store")
    seen = 0
    for part in Partition:
        values, offsets = store.arrays(part)
        for i, doc_id in enumerate(store.ids(part)):
            want = ([] if bos is None else [hf.token_to_id(bos)]) + hf.encode(
                texts[doc_id], add_special_tokens=False).ids + [hf.token_to_id(eos)]
            assert values[offsets[i]:offsets[i + 1]].tolist() == want, doc_id
            seen += 1
    assert seen == len(texts)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["tokenizer"]["kind"] == "hf-bpe"
    assert ("adds no BOS" in " ".join(report["tokenizer"]["notes"])) == (name == "qwen2")
    assert load_tokenizer(out / "tokenizer.json") == load_tokenizer(prepared[2])


def test_windows_packing_and_import_over_the_store(prepared, tmp_path):
    name, _, folder, out, _ = prepared
    store = TokenStore.open(out / "store")
    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(16, 8),
                                 batches=MiniBatchConfig(4, BatchOrder.shuffled(3)))
    batch = epoch.batch(0, dtype=np.int64)
    assert batch.inputs.shape == (4, 16) and (batch.inputs[:, 1:] == batch.targets[:, :-1]).all()
    packed = tmp_path / "packed"
    result = run("pack", out / "store", "--row-length", "32", "--out", packed)
    assert result.exit_code == 0, result.output
    assert pq.read_table(packed / "rows.parquet").num_rows > 0
    imported = tmp_path / "imported.json"
    result = run("tokenizers", "import", folder, "--out", imported)
    assert result.exit_code == 0, result.output
    assert "hf-bpe" in result.output and load_tokenizer(imported) == load_tokenizer(folder)


def test_token_dataset_over_the_store(prepared):
    torch = pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]')")
    from engine.torch import TokenDataset

    _, _, _, out, _ = prepared
    store = TokenStore.open(out / "store")
    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(16, 8),
                                 batches=MiniBatchConfig(4, BatchOrder.shuffled(3)))
    items = list(TokenDataset(epoch))
    assert len(items) == epoch.batch_count
    assert items[0]["input_ids"].dtype == torch.int64
    assert items[0]["input_ids"].tolist() == epoch.batch(0, dtype=np.int64).inputs.tolist()
