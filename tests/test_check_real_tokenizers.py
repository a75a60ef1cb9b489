"""scripts/check_real_tokenizers.py on files made here (the real ones come from the package index):
it reports every text equal for a faithful loader and names the first difference otherwise."""

import base64
import json
import sys
from pathlib import Path

import pytest

from engine.tokenizers import ByteBpeTrainer
from engine.tokenizers.interop import save_tiktoken

pytest.importorskip("tiktoken", reason="needs the test extra (pip install -e '.[test]')")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import check_real_tokenizers as script  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory, shakespeare_text):
    """llama3.tiktoken and tekken_240911.json written from a tokenizer trained on Tiny Shakespeare."""
    folder = tmp_path_factory.mktemp("vocab")
    tok = ByteBpeTrainer(vocab_size=700, pattern=script.LLAMA3).train([shakespeare_text[:300_000]])
    lines = save_tiktoken(tok, folder / "ranks").read_text().splitlines()
    tokens = [base64.b64decode(line.split()[0]) for line in lines if not line.startswith("= ")]
    ranks = [bytes([b]) for b in range(256)] + [t for t in tokens if len(t) > 1]
    (folder / "llama3.tiktoken").write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(ranks)))
    tekken = {"config": {"pattern": script.O200K, "default_vocab_size": 20 + len(ranks) - 7,
                         "default_num_special_tokens": 20, "version": "v3"},
              "vocab": [{"rank": r, "token_bytes": base64.b64encode(t).decode(), "token_str": ""}
                        for r, t in enumerate(ranks)]}
    (folder / "tekken_240911.json").write_text(json.dumps(tekken))
    return folder


def test_faithful_files_are_all_equal(folder, capsys):
    assert script.main([str(folder), "--only", "llama3,tekken"]) == 0
    out = capsys.readouterr().out.splitlines()
    n = len(script.texts())
    assert out == [f"llama3 (tiktoken): {n}/{n} texts equal", f"tekken (tekken): {n}/{n} texts equal"]


def test_a_difference_is_named(folder, tmp_path, capsys, monkeypatch):
    """A reference that disagrees on one text (here: a tampered one) is reported with where it differs."""
    own = script.reference

    def tampered(kind, path, regex):
        ref = own(kind, path, regex)
        return lambda text: [i + 1 for i in ref(text)] if text.startswith("The quick") else ref(text)

    monkeypatch.setattr(script, "reference", tampered)
    assert script.main([str(folder), "--only", "llama3,cl100k"]) == 1
    out = capsys.readouterr().out.splitlines()
    n = len(script.texts())
    k = script.texts().index(script.SAMPLES[0])
    assert out[0].startswith(f"llama3 (tiktoken): {n - 1}/{n} texts equal; first difference text {k} "
                             f"{script.SAMPLES[0][:40]!r}: at token 0 engine [")
    assert out[1] == f"cl100k: {folder / 'cl100k_base.tiktoken'} missing (run with --fetch)"
