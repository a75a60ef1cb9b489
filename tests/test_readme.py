"""Every ```python block of README.md runs as written, in a temporary copy of the bundled data.

``BLOCKS`` lists each block by (section, index inside the section) with what it needs: ``run`` (the
block runs alone, from a folder holding ``data/``), a function that provides the names the block
takes from the text around it (a store, the user's tensors) and checks what it computed, or
``skip`` with the reason it cannot run here. A block README gains or loses fails
``test_every_python_block_is_listed`` until it is listed, so no snippet goes unchecked silently.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from engine.cli import main
from tests.conftest import ROOT

README = ROOT / "README.md"
TORCH = "needs the torch extra (pip install -e '.[torch]')"


def sections() -> dict[str, str]:
    """README's ``## `` sections by title (the text up to the next ``## `` heading)."""
    text = README.read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def blocks(language: str) -> dict[tuple[str, int], str]:
    """``{(section, index): code}`` of every fenced block in ``language``."""
    found = {}
    for title, body in sections().items():
        for index, code in enumerate(re.findall(rf"^```{language}\n(.*?)^```", body, flags=re.M | re.S)):
            found[(title, index)] = code
    return found


def run_block(key: tuple[str, int], namespace: dict | None = None) -> dict:
    namespace = {} if namespace is None else namespace
    exec(compile(blocks("python")[key], f"README.md ({key[0]}, block {key[1]})", "exec"), namespace)
    return namespace


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder holding a copy of the bundled ``data/``, as the current directory."""
    shutil.copytree(ROOT / "data", tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def bundled_store(workdir):
    import engine

    engine.prepare(out_dir=workdir / "out", quiet=True)  # what the Quickstart's `engine prepare` writes
    return engine.TokenStore.open(workdir / "out")


# -- the blocks ------------------------------------------------------------------------------------


def quickstart(workdir):
    torch = pytest.importorskip("torch", reason=TORCH)
    for line in blocks("bash")[("Quickstart", 0)].splitlines():
        command = shlex.split(line, comments=True)
        if command[:1] == ["engine"]:  # the pip line installs what this test runs from
            result = CliRunner().invoke(main, command[1:])
            assert result.exit_code == 0, result.output
            assert "warning" not in result.stderr.lower(), result.stderr  # the first command is clean
    namespace = {}
    run_block(("Quickstart", 0), namespace)
    # bundled corpus at T = 32: 3,571 train windows in batches of 16 (the last one holds 3)
    assert namespace["epoch"].window_count == 3571 and namespace["epoch"].batch_count == 224
    assert torch.isfinite(namespace["loss"]).item()


def python_api(workdir):
    from engine import audit_epoch

    first = run_block(("Python API", 0))
    batch, epoch = first["batch"], first["epoch"]
    assert batch.index == 12 and batch.inputs.shape == batch.targets.shape == (32, 64)
    assert batch.inputs.dtype == np.uint32 and audit_epoch(epoch).ok
    assert repr(batch.provenance[0]).startswith("Provenance(partition=<Partition.TRAIN: 'train'>, document_index=12, ")
    # the second block reads the user's corpus.jsonl: the bundled corpus stands in for it
    shutil.copy(workdir / "data" / "corpus.jsonl", workdir / "corpus.jsonl")
    second = run_block(("Python API", 1))
    assert second["result"].report["tokenizer"]["kind"] == "bpe-byte"
    assert second["result"].report["context_length"] == 256
    assert second["store"].num_documents("train") == second["result"].report["partitions"]["train"]["documents"]


def packed_rows_with_attention(workdir):
    torch = pytest.importorskip("torch", reason=TORCH)
    import engine

    store = bundled_store(workdir)
    rows = engine.pack_documents(store, 4096, split="train").segment_ids[:8].shape[0]
    # the names the block takes from the user's model: queries, keys, values [rows, heads, L, dim]
    # and per-token losses [rows, L]
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(rows, 2, 4096, 8, generator=generator) for _ in range(3))
    given = {"torch": torch, "store": store, "q": q, "k": k, "v": v, "token_loss": torch.ones(rows, 4096)}
    namespace = run_block(("Packed rows with PyTorch attention", 0), given)
    out, padding = namespace["out"], torch.from_numpy(namespace["seg"] < 0)
    assert out.shape == (rows, 2, 4096, 8) and padding.any()
    assert torch.all(out.permute(0, 2, 1, 3)[padding] == 0)  # padding outputs zeroed
    assert namespace["loss"].item() == 1.0  # losses of 1: the mean over scored targets is 1


def packed_epoch_loop(workdir):
    torch = pytest.importorskip("torch", reason=TORCH)
    import engine

    # "store is any token store with at least 20 such batches": the block's own note names Tiny Shakespeare
    corpus = workdir / "shakespeare.txt"
    corpus.write_text((workdir / "data" / "tinyshakespeare.txt").read_text(encoding="utf-8")[:60_000], encoding="utf-8")
    engine.prepare(corpus, out_dir=workdir / "out", tokenizer="char", quiet=True)
    store = engine.TokenStore.open(workdir / "out" / "store")
    namespace = run_block(("Packed epochs, FlexAttention and mixtures", 0), {"store": store})
    assert namespace["step"] == 19
    assert namespace["state"] == {"seed": 7, "epoch": 0, "next_batch": 20, "global_batch_size": 8}
    assert torch.isfinite(namespace["loss"]).item()
    # the state resumes: a fresh dataset starts at global batch 20
    resumed = engine.torch.TokenDataset(namespace["epoch"], epochs=2)
    resumed.load_state_dict(namespace["state"])
    first = next(iter(resumed))
    expected = namespace["epoch"].batch(20, dtype="int64")
    assert first["batch_index"] == 20 and first["input_ids"].tolist() == expected.inputs.tolist()


def mixture(workdir):
    pytest.importorskip("torch", reason=TORCH)
    import engine
    from engine.torch import TokenDataset

    store = bundled_store(workdir)
    # the user's three epochs: three orders of the bundled train windows
    web, code, tiny = (engine.MiniBatchEpoch.build(store, "train", windows=engine.CausalWindowConfig(32),
                                                   batches=engine.MiniBatchConfig(8, engine.BatchOrder.shuffled(s)))
                       for s in (1, 2, 3))
    namespace = run_block(("Packed epochs, FlexAttention and mixtures", 1),
                          {"web_epoch": web, "code_epoch": code, "tiny_epoch": tiny, "TokenDataset": TokenDataset})
    batch = namespace["batch"]
    assert batch.inputs.shape == (8, 32) and batch.provenance[0]["source"] in ("web", "code", "tiny")
    report = namespace["mix"].report(1001)
    assert [row["source"] for row in report] == ["web", "code", "tiny"]
    assert sum(row["samples"] for row in report) == 1001 * 8
    assert [row["samples"] for row in report][2] in (8, 9)  # weight 0.001 of 8,008 samples, within one


def export_for_trainer(workdir):
    pytest.importorskip("datasets", reason="needs the bench extra (pip install -e '.[bench]')")
    store = bundled_store(workdir)
    namespace = run_block(("Export for your trainer", 0))
    documents = store.documents("train")
    lengths = np.array([len(d.tokens) - 1 for d in documents])  # written without BOS
    idx = (workdir / "out" / "megatron" / "train_text_document.idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00" and np.array_equal(np.frombuffer(idx, "<i4", len(documents), 34), lengths)
    assert len(namespace["hf"]) == len(documents) and namespace["epoch"].batch_count == namespace["same"].batch_count
def chat_data(workdir):
    from tests.chat_helpers import model_folder

    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    model_folder(workdir / "out" / "tiny_chat" / "model", template, bos=None, eos="<|im_end|>")
    command = shlex.split(blocks("bash")[("Fine-tune on chat data", 0)].strip())
    result = CliRunner().invoke(main, command[1:] + ["--quiet"])
    assert result.exit_code == 0, result.output
    assert "chat: messages, template out/tiny_chat/model/tokenizer_config.json, train on assistant" in result.output
    namespace = run_block(("Fine-tune on chat data", 0))
    doc, batch, audit = namespace["doc"], namespace["batch"], namespace["audit"]
    assert doc.roles.shape == doc.tokens.shape and 0 < doc.roles.sum() < len(doc.tokens)
    assert 0 < batch.loss_weights.sum() < batch.loss_weights.size and audit.every_flagged_transition_once


BLOCKS = {
    ("Quickstart", 0): quickstart,
    ("Python API", 0): python_api,
    ("Python API", 1): python_api,  # one test runs both: the second reads what the first leaves
    ("Train a model", 0): "skip: an endless loop (epochs=None) around the user's model and checkpoint; the "
                          "Quickstart runs the same loop over one epoch",
    ("Train a model", 1): "skip: needs transformers, which no extra installs; tests/test_torch.py checks the "
                          "labels it trains on value by value",
    ("Packed rows with PyTorch attention", 0): packed_rows_with_attention,
    ("Packed rows with PyTorch attention", 1): "skip: needs CUDA and flash_attn (flash_attn_varlen_func)",
    ("Packed epochs, FlexAttention and mixtures", 0): packed_epoch_loop,
    ("Packed epochs, FlexAttention and mixtures", 1): mixture,
    ("Export for your trainer", 0): export_for_trainer,
    ("Fine-tune on chat data", 0): chat_data,
}


def test_every_python_block_is_listed():
    assert sorted(blocks("python")) == sorted(BLOCKS)


@pytest.mark.parametrize("check", sorted({c for c in BLOCKS.values() if callable(c)}, key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_readme_block_runs(check, workdir):
    check(workdir)


def test_skipped_blocks_say_why():
    for key, check in BLOCKS.items():
        assert callable(check) or (check.startswith("skip: ") and len(check) > 20), key


# -- the text around the blocks ----------------------------------------------------------------------


def github_anchor(title: str) -> str:
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def test_contents_list_every_section_in_order():
    text = README.read_text(encoding="utf-8")
    contents = re.search(r"^\*\*Contents:\*\*(.*?)\n\n", text, flags=re.M | re.S).group(1)
    links = re.findall(r"\[([^\]]+)\]\(#([^)]+)\)", contents)
    assert [title for title, _ in links] == list(sections())
    assert [anchor for _, anchor in links] == [github_anchor(title) for title in sections()]


def test_quickstart_is_short():
    body = sections()["Quickstart"]
    code_lines = [line for block in re.findall(r"^```\w*\n(.*?)^```", body, flags=re.M | re.S)
                  for line in block.splitlines()]
    assert len(code_lines) <= 20


def test_rules_table_names_files_that_exist():
    table = sections()["Where the rules are stated"]
    paths = re.findall(r"`(engine/[\w/]+\.py)`", table)
    assert len(paths) >= 18
    for path in paths:
        assert (ROOT / path).is_file(), path


def test_no_citation_of_files_outside_the_repository():
    """The rules are stated in the project: nothing cites a contract or worked-example file kept elsewhere."""
    outside = re.compile("SP" + r"EC\b|" + "refer" + r"ence/\w")  # spelt apart so that this file passes
    for folder in ("engine", "tests", "bench", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            assert not outside.search(path.read_text(encoding="utf-8")), path
    assert not outside.search(README.read_text(encoding="utf-8"))


def test_subpackages_are_attributes_of_engine_without_torch():
    """README's ``engine.tokenizers.load_tiktoken(...)`` after ``import engine``: subpackages load on first use."""
    code = ("import sys, engine\n"
            "assert callable(engine.tokenizers.load_tiktoken) and callable(engine.tokenizers.load_hf_tokenizer_json)\n"
            "assert engine.corpus.Partition.TRAIN.value == 'train' and engine.store.TokenStore is engine.TokenStore\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "try:\n    engine.no_such_module\nexcept AttributeError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "module 'engine' has no attribute 'no_such_module'\n"
