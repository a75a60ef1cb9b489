"""README's packed training loop ("Packed epochs, FlexAttention and mixtures") runs as printed."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch", reason="needs the torch extra (pip install -e '.[torch]')")

import engine  # noqa: E402
from tests.conftest import ROOT  # noqa: E402


def section_code(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(f"## {title}\n"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_packed_training_loop_snippet_runs(tmp_path):
    corpus = tmp_path / "shakespeare.txt"
    corpus.write_text((ROOT / "data" / "tinyshakespeare.txt").read_text(encoding="utf-8")[:60_000], encoding="utf-8")
    engine.prepare(corpus, out_dir=tmp_path / "out", tokenizer="char", quiet=True)
    store = engine.TokenStore.open(tmp_path / "out" / "store")
    namespace = {"store": store}
    exec(compile(section_code("Packed epochs, FlexAttention and mixtures"), "README.md", "exec"), namespace)
    assert namespace["step"] == 19
    assert namespace["state"] == {"seed": 7, "epoch": 0, "next_batch": 20, "global_batch_size": 8}
    assert torch.isfinite(namespace["loss"]).item()
    # the state resumes: a fresh dataset starts at global batch 20
    resumed = engine.torch.TokenDataset(namespace["epoch"], epochs=2)
    resumed.load_state_dict(namespace["state"])
    first = next(iter(resumed))
    expected = namespace["epoch"].batch(20, dtype="int64")
    assert first["batch_index"] == 20 and first["input_ids"].tolist() == expected.inputs.tolist()
