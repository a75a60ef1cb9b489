"""engine prepare on chat and instruction data: --format, columns, templates, wrappers, errors
(engine.chat_local, engine.chat.records)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.store import TokenStore
from tests.chat_helpers import CONVERSATIONS, hf_tokenizer, model_folder

QWEN = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
MARKED = ("{% for m in messages %}{% if m['role'] == 'assistant' %}<|im_start|>assistant\n{% generation %}"
          "{{ m['content'] }}<|im_end|>{% endgeneration %}\n{% else %}<|im_start|>{{ m['role'] }}\n"
          "{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}")


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return model_folder(tmp_path_factory.mktemp("m") / "model", QWEN, bos=None, eos="<|im_end|>")


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _prepare(*args) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["prepare", *map(str, args), "--quiet", "--hash-split", "1,0,0",
                                       "--context", "4"])
    return result.exit_code, result.output


def _chats(n=12):
    return [{"id": f"c{i}", "messages": CONVERSATIONS[i % len(CONVERSATIONS)]} for i in range(n)]


@pytest.mark.parametrize("form", ["jsonl", "parquet", "arrow"])
def test_messages_detected_and_ids_equal_transformers(form, tmp_path, model):
    records = _chats()
    if form == "jsonl":
        corpus = _jsonl(tmp_path / "chats.jsonl", records)
    else:
        table = pa.Table.from_pylist(records)
        corpus = tmp_path / f"chats.{form}"
        if form == "parquet":
            pq.write_table(table, corpus)
        else:
            with pa.OSFile(str(corpus), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
                w.write_table(table)
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out")
    assert code == 0, output
    assert "chat: messages, template" in output and "wrappers: bos none, eos <|im_end|>" in output
    store = TokenStore.open(tmp_path / "out")
    assert store.has_roles and store.verify() == 3
    reference = hf_tokenizer(model / "tokenizer.json", QWEN, bos=None, eos="<|im_end|>")
    docs = store.documents("train")
    assert [d.id for d in docs] == [r["id"] for r in records]
    for doc, record in zip(docs, records):
        expected = reference.apply_chat_template(record["messages"], tokenize=True, return_dict=True)
        assert doc.tokens.tolist() == expected["input_ids"]
        assert doc.roles.shape == doc.tokens.shape and doc.roles.sum() > 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["chat"]["examples"] == 12 and report["chat"]["bos"] is None and report["chat"]["eos"] == "<|im_end|>"
    assert report["chat"]["scored_tokens"] == sum(int(d.roles[1:].sum()) for d in docs)


def test_training_template_flags_equal_assistant_masks(tmp_path, model):
    (tmp_path / "t.jinja").write_text(MARKED)
    corpus = _jsonl(tmp_path / "c.jsonl", [{"conv": r["messages"]} for r in _chats(8)])
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out", "--format", "messages",
                            "--messages-column", "conv", "--chat-template", tmp_path / "t.jinja")
    assert code == 0, output
    assert "{% generation %} markers" in output
    reference = hf_tokenizer(model / "tokenizer.json", MARKED, bos=None, eos="<|im_end|>")
    store = TokenStore.open(tmp_path / "out")
    for i, doc in enumerate(store.documents("train")):
        assert doc.id == f"c.jsonl:{i + 1:06d}"  # made from file and line
        expected = reference.apply_chat_template(CONVERSATIONS[i % 4], tokenize=True, return_dict=True,
                                                 return_assistant_tokens_mask=True)
        assert doc.tokens.tolist() == expected["input_ids"] and doc.roles.tolist() == expected["assistant_masks"]


def test_prompt_completion_texts(tmp_path, model):
    records = [{"prompt": "Th", "completion": "e"}, {"prompt": "Hello", "completion": " world"}]
    corpus = _jsonl(tmp_path / "pc.jsonl", records)
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out", "--bos", "<|begin_of_text|>")
    assert code == 0, output
    assert "1 would differ if prompt and completion were encoded joined" in output
    from engine.tokenizers.loading import load_tokenizer

    tok = load_tokenizer(model / "tokenizer.json")
    sp = tok.specials
    docs = TokenStore.open(tmp_path / "out").documents("train")
    for doc, r in zip(docs, records):
        p, c = tok.encode(r["prompt"]).tolist(), tok.encode(r["completion"]).tolist()
        assert doc.tokens.tolist() == [sp["<|begin_of_text|>"], *p, *c, sp["<|im_end|>"]]
        assert doc.roles.tolist() == [0] * (1 + len(p)) + [1] * (len(c) + 1)
    report = json.loads((tmp_path / "out" / "report.json").read_text())["chat"]
    assert report["joint_encoding_differs"] == 1 and report["bos"] == "<|begin_of_text|>"
    # the tokenizer_config.json says bos_token null: no BOS by default, [content..., EOS]
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out2")
    doc = TokenStore.open(tmp_path / "out2").documents("train")[1]
    assert doc.tokens.tolist() == [*tok.encode("Hello").tolist(), *tok.encode(" world").tolist(), sp["<|im_end|>"]]


def test_conversational_prompt_completion(tmp_path, model):
    prompt = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "earlier answer"},
              {"role": "user", "content": "again"}]
    completion = [{"role": "assistant", "content": "the answer"}]
    corpus = _jsonl(tmp_path / "pc.jsonl", [{"prompt": prompt, "completion": completion}])
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out")
    assert code == 0, output
    doc = TokenStore.open(tmp_path / "out").documents("train")[0]
    reference = hf_tokenizer(model / "tokenizer.json", QWEN, bos=None, eos="<|im_end|>")
    assert doc.tokens.tolist() == reference.apply_chat_template(prompt + completion, tokenize=True, return_dict=True)["input_ids"]
    from engine.tokenizers.loading import load_tokenizer

    flagged = load_tokenizer(model / "tokenizer.json").decode_bytes(doc.tokens[doc.roles == 1])
    assert flagged == b"the answer"  # and <|im_end|>, whose bytes are not text


@pytest.mark.parametrize("record, message", [
    ({"messages": [{"role": "user"}]}, 'c.jsonl:2: field "messages" message 0 has no "content"'),
    ({"messages": [{"content": "x"}]}, 'c.jsonl:2: field "messages" message 0 has no "role"'),
    ({"messages": [{"role": "robot", "content": "x"}]}, "c.jsonl:2: field \"messages\" message 0: unknown role 'robot'"),
    ({"messages": [{"role": "user", "content": 3}]}, 'c.jsonl:2: field "messages" message 0: "content" is int'),
    ({"messages": []}, 'c.jsonl:2: field "messages" is an empty conversation'),
    ({"messages": [{"role": "user", "content": "only a question"}]}, "c.jsonl:2: the chat template .*"
                                                                      "renders no assistant content"),
])
def test_bad_records_name_file_line_and_field(record, message, tmp_path, model):
    corpus = _jsonl(tmp_path / "c.jsonl", [_chats(1)[0] | {"id": "a"}, record | {"id": "b"}])
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out", "--format", "messages")
    assert code == 2, output
    import re

    assert re.search(message, output), output
    assert not (tmp_path / "out" / "store").exists()


def test_chat_needs_a_model_tokenizer_and_a_template(tmp_path, model):
    corpus = _jsonl(tmp_path / "c.jsonl", _chats(2))
    code, output = _prepare(corpus, "--out", tmp_path / "out")
    assert code == 2 and "chat data is encoded with a model's tokenizer" in output
    code, output = _prepare(corpus, "--tokenizer", model / "tokenizer.json", "--out", tmp_path / "out",
                            "--chat-template", tmp_path / "missing.jinja")
    assert code == 2 and "--chat-template" in output and "file not found" in output
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out", "--format", "text")
    assert code == 2 and 'c.jsonl:1: missing "text"' in output


def test_train_on_all_and_last(tmp_path, model):
    corpus = _jsonl(tmp_path / "c.jsonl", _chats(2))
    code, _ = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "all", "--train-on", "all")
    assert code == 0
    assert all(d.roles.all() for d in TokenStore.open(tmp_path / "all").documents("train"))
    code, _ = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "last", "--train-on", "last-assistant")
    assert code == 0
    last = TokenStore.open(tmp_path / "last").documents("train")[1]
    every = TokenStore.open(tmp_path / "all").documents("train")[1]
    assert np.array_equal(last.tokens, every.tokens) and 0 < last.roles.sum() < every.roles.sum()


def test_inspect_names_the_role_flags(tmp_path, model):
    corpus = _jsonl(tmp_path / "c.jsonl", _chats(3))
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out")
    assert code == 0, output
    result = CliRunner().invoke(main, ["inspect", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "format version  2" in result.output and "role flags      yes" in result.output
    assert "bos / eos ids   none / " in result.output
    assert TokenStore.open(tmp_path / "out").bos_id is None


def test_invalid_utf8_and_text_options_are_refused(tmp_path, model):
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(json.dumps(_chats(1)[0]).encode() + b"\n" + b'{"id": "b", "messages": "\xff"}\n')
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out", "--format", "messages")
    assert code == 2 and "c.jsonl:2: invalid UTF-8 at byte" in output
    code, output = _prepare(corpus, "--tokenizer", model, "--out", tmp_path / "out", "--format", "messages",
                            "--skip-bad-lines")
    assert code == 2 and "--skip-bad-lines, --on-invalid-utf8 and --text-column apply to --format text" in output
