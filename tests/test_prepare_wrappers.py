"""prepare --bos TOKEN|none --eos TOKEN: documents wrapped as the model's tokenizer_config.json says
(no BOS for a tokenizer without one: [content..., EOS]); every window and packing rule holds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
from engine.audit import audit_epoch
from engine.cli import main
from engine.packed import PackedEpoch
from engine.store import TokenStore
from engine.tokenizers.loading import load_tokenizer
from engine.windows import CausalWindowConfig
from tests.chat_helpers import model_folder

TEXTS = ["the first document", "a second, longer document of plain text", "x"]


@pytest.fixture(scope="module")
def qwen_like(tmp_path_factory) -> Path:
    return model_folder(tmp_path_factory.mktemp("q") / "model", "{{ messages }}", bos=None, eos="<|im_end|>")


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    return path


def _prepare(*args):
    result = CliRunner().invoke(main, ["prepare", *map(str, args), "--quiet", "--hash-split", "1,0,0",
                                       "--context", "3"])
    return result.exit_code, result.output


def test_no_bos_from_tokenizer_config(tmp_path, qwen_like):
    code, output = _prepare(_corpus(tmp_path), "--tokenizer", qwen_like, "--out", tmp_path / "out")
    assert code == 0, output
    assert "wrappers: bos none, eos <|im_end|>" in output
    tok = load_tokenizer(qwen_like / "tokenizer.json")
    end = tok.specials["<|im_end|>"]
    store = TokenStore.open(tmp_path / "out")
    assert store.bos_id is None and store.eos_id == end and store.verify() == 3
    for doc, text in zip(store.documents("train"), TEXTS):
        assert doc.tokens.tolist() == [*tok.encode(text).tolist(), end]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["wrappers"] == {"bos": None, "bos_id": None, "eos": "<|im_end|>", "eos_id": end}
    # windows, epochs and packing hold as ever: every window inside a document, every transition once
    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(3, 1),
                                 batches=MiniBatchConfig(2, BatchOrder.shuffled(1)))
    assert audit_epoch(epoch).ok
    lengths = [len(tok.encode(t)) + 1 for t in TEXTS]
    assert epoch.window_count == sum(max(n - 3, 0) for n in lengths)
    packed = PackedEpoch.build(store, "train", row_length=8, batches=MiniBatchConfig(2))
    assert packed.audit().every_transition_once


def test_bos_and_eos_named(tmp_path, qwen_like):
    code, output = _prepare(_corpus(tmp_path), "--tokenizer", qwen_like, "--out", tmp_path / "out",
                            "--bos", "<|begin_of_text|>", "--eos", "<|endoftext|>")
    assert code == 0, output
    tok = load_tokenizer(qwen_like / "tokenizer.json")
    sp = tok.specials
    assert "wrappers: bos <|begin_of_text|>" in output
    doc = TokenStore.open(tmp_path / "out").documents("train")[0]
    assert doc.tokens.tolist() == [sp["<|begin_of_text|>"], *tok.encode(TEXTS[0]).tolist(), sp["<|endoftext|>"]]


def test_bad_wrappers(tmp_path, qwen_like):
    code, output = _prepare(_corpus(tmp_path), "--tokenizer", qwen_like, "--out", tmp_path / "out", "--eos", "<nope>")
    assert code == 2 and "eos token '<nope>' is not a token of the file" in output, output
    code, output = _prepare(_corpus(tmp_path), "--out", tmp_path / "out", "--bos", "none")
    assert code == 2 and "--bos and --eos apply to a tokenizer file" in output


def test_tokenizer_file_without_config_keeps_its_wrappers(tmp_path, qwen_like):
    import shutil

    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(qwen_like / "tokenizer.json", lone / "tokenizer.json")
    code, output = _prepare(_corpus(tmp_path), "--tokenizer", lone / "tokenizer.json", "--out", tmp_path / "out")
    assert code == 0, output
    tok = load_tokenizer(lone / "tokenizer.json")
    doc = TokenStore.open(tmp_path / "out").documents("train")[0]
    assert doc.tokens.tolist() == [tok.bos_id, *tok.encode(TEXTS[0]).tolist(), tok.eos_id]
    assert np.array_equal(doc.tokens[[0, -1]], [tok.specials["<|endoftext|>"]] * 2)


def test_a_sentencepiece_model_without_bos_stores_content_then_eos(tmp_path):
    """A .model trained with bos_id=-1 has no BOS: prepare stores [content..., EOS] (bos_id null),
    the content equal to sentencepiece's own ids, and epochs and packing audit clean over it."""
    spm = pytest.importorskip("sentencepiece")
    text = (Path(__file__).resolve().parents[1] / "data" / "tinyshakespeare.txt").read_text(encoding="utf-8")[:100_000]
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(tmp_path / "t.txt"), model_prefix=str(tmp_path / "nobos"),
                                   model_type="bpe", vocab_size=400, bos_id=-1, eos_id=2, unk_id=0, pad_id=-1,
                                   minloglevel=2)
    corpus = _corpus(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["prepare", str(corpus), "--hash-split", "1,0,0", "--tokenizer",
                                       str(tmp_path / "nobos.model"), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    store = TokenStore.open(out)
    processor = spm.SentencePieceProcessor(model_file=str(tmp_path / "nobos.model"))
    got = {d.id: d.tokens.tolist() for d in store.documents("train")}
    manifest = json.loads((out / "store" / "_engine.json").read_text())
    assert manifest["tokenizer"]["bos_id"] is None
    for tokens in got.values():
        assert tokens[-1] == 2 and 2 not in tokens[:-1]
    assert sorted(tokens[:-1] for tokens in got.values()) == sorted(processor.encode(t) for t in TEXTS)
    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(2, 1),
                                 batches=MiniBatchConfig(2, BatchOrder.shuffled(3)))
    assert audit_epoch(epoch).ok


def test_a_tokenizer_json_alone_without_bos_stores_content_then_eos(tmp_path):
    """A Qwen2-shaped tokenizer.json alone (its post_processor writes no BOS, no tokenizer_config.json):
    prepare stores [content..., <|endoftext|>] with Hugging Face's ids, the saved tokenizer reads
    back the same, and windows and packing audit clean; --eos alone names another end."""
    pytest.importorskip("tokenizers", reason="needs the test extra (pip install -e '.[test]')")
    from tests.naive_hf import build_family

    hf = build_family("qwen2", 300)
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    corpus = _corpus(tmp_path)
    code, output = _prepare(corpus, "--tokenizer", path, "--out", tmp_path / "out")
    assert code == 0, output
    end = hf.token_to_id("<|endoftext|>")
    assert f"wrappers: bos none, eos <|endoftext|> ({end})" in output
    store = TokenStore.open(tmp_path / "out")
    assert store.bos_id is None and store.eos_id == end
    hf.encode_special_tokens = True
    for doc, text in zip(store.documents("train"), TEXTS):
        assert doc.tokens.tolist() == [*hf.encode(text, add_special_tokens=False).ids, end]
    saved = load_tokenizer(tmp_path / "out" / "tokenizer.json")
    assert saved.bos_id is None and saved.eos_id == end and saved == load_tokenizer(path)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["wrappers"] == {"bos": None, "bos_id": None, "eos": "<|endoftext|>", "eos_id": end}
    epoch = MiniBatchEpoch.build(store, "train", windows=CausalWindowConfig(3, 1),
                                 batches=MiniBatchConfig(2, BatchOrder.shuffled(1)))
    assert audit_epoch(epoch).ok
    assert epoch.window_count == sum(max(len(hf.encode(t, add_special_tokens=False).ids) + 1 - 3, 0) for t in TEXTS)
    assert PackedEpoch.build(store, "train", row_length=8, batches=MiniBatchConfig(2)).audit().every_transition_once
    code, output = _prepare(corpus, "--tokenizer", path, "--out", tmp_path / "named", "--eos", "<|im_end|>")
    assert code == 0, output
    im_end = hf.token_to_id("<|im_end|>")
    doc = TokenStore.open(tmp_path / "named").documents("train")[0]
    assert doc.tokens.tolist() == [*hf.encode(TEXTS[0], add_special_tokens=False).ids, im_end]
    # the Python API: such a tokenizer's documents go to a store as they are
    from engine.buffers import EncodedDocument

    tok = load_tokenizer(path)
    docs = [EncodedDocument(f"d{i}", "train", tok.encode_document(t)) for i, t in enumerate(TEXTS + [""])]
    written = TokenStore.write(tmp_path / "api", {"train": docs}, tok)
    assert written.bos_id is None and written.verify() >= 1 and len(written.documents("train")) == 4
    assert [d.tokens.tolist() for d in written.documents("train")][-1] == [end]
