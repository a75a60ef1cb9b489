"""Chat templates rendered and tokenized: ids equal transformers' apply_chat_template, and role flags
equal its assistant_masks where the template has {% generation %} markers (engine.chat.encode)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.chat.encode import ChatEncoder
from engine.chat.template import ChatTemplate, ChatTemplateError, load_chat_template
from engine.tokenizers.loading import load_tokenizer
from tests.chat_helpers import CONVERSATIONS, build_tokenizer_json, hf_tokenizer

SPECIAL_STRINGS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|endoftext|>"}
# Text-only templates TRL ships (the vision ones take content lists), original and training variants.
TRL_TEMPLATES = ["qwen2_5", "qwen2_5_training", "qwen3", "qwen3_training", "llama3", "llama3_training", "llama3_1",
                 "phi3", "phi3_training", "gemma3", "gemma3_training", "deepseekv3", "deepseekv3_training",
                 "cohere2", "cohere2_training", "glm4moe_training", "gptoss_training", "lfm2", "lfm2_training"]

QWEN_LIKE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
QWEN_MARKED = ("{% for m in messages %}{% if m['role'] == 'assistant' %}<|im_start|>assistant\n{% generation %}"
               "{{ m['content'] }}<|im_end|>{% endgeneration %}\n{% else %}<|im_start|>{{ m['role'] }}\n"
               "{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}")


def trl_template(name: str) -> str:
    trl = pytest.importorskip("trl", reason="needs the bench extra (trl ships the chat templates)")
    path = Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja"
    # the pinned trl ships every template these tests name: a missing one is a failure, not a skip
    assert path.is_file(), f"trl {trl.__version__} ships no {name}.jinja (the pin in .ci/constraints.txt moved?)"
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory) -> Path:
    return build_tokenizer_json(tmp_path_factory.mktemp("tok") / "tokenizer.json")


@pytest.fixture(scope="module")
def engine_tokenizer(tokenizer_json):
    return load_tokenizer(tokenizer_json)


def _check_against_transformers(source: str, tokenizer_json: Path, engine_tokenizer, conversations) -> int:
    template = ChatTemplate(source, name="t", special_tokens=SPECIAL_STRINGS)
    reference = hf_tokenizer(tokenizer_json, source)
    encoder = ChatEncoder(engine_tokenizer, template)
    flags_checked = 0
    for conversation in conversations:
        expected = reference.apply_chat_template(conversation, tokenize=True, return_dict=True,
                                                 return_assistant_tokens_mask=template.has_generation)
        got = encoder.encode_conversation(conversation, "c.jsonl:1")
        assert got.tokens.dtype == np.uint32 and got.roles.dtype == np.uint8
        assert got.tokens.tolist() == list(expected["input_ids"])
        assert got.roles.shape == got.tokens.shape
        if template.has_generation:
            assert got.roles.tolist() == list(expected["assistant_masks"])
            flags_checked += 1
    return flags_checked


@pytest.mark.parametrize("name", TRL_TEMPLATES)
def test_ids_and_flags_equal_transformers_on_trl_templates(name, tokenizer_json, engine_tokenizer):
    source = trl_template(name)
    checked = _check_against_transformers(source, tokenizer_json, engine_tokenizer, CONVERSATIONS)
    assert checked == (len(CONVERSATIONS) if "{% generation %}" in source or "{%- generation %}" in source else 0)


def test_ids_and_flags_equal_transformers_on_own_templates(tokenizer_json, engine_tokenizer):
    assert _check_against_transformers(QWEN_MARKED, tokenizer_json, engine_tokenizer, CONVERSATIONS) == 4
    _check_against_transformers(QWEN_LIKE, tokenizer_json, engine_tokenizer, CONVERSATIONS)


def _flagged_text(encoder, conversation):
    got = encoder.encode_conversation(conversation, "c")
    return encoder.tokenizer.decode_bytes(got.tokens[got.roles == 1]).decode("utf-8"), got


def test_without_markers_content_and_end_of_turn_are_flagged(engine_tokenizer):
    encoder = ChatEncoder(engine_tokenizer, ChatTemplate(QWEN_LIKE, special_tokens=SPECIAL_STRINGS))
    conversation = CONVERSATIONS[1]
    text, got = _flagged_text(encoder, conversation)
    assert text == "hello hello" + "bonjour — été ☀"  # the decoded bytes of the specials are not text
    im_end = engine_tokenizer.specials["<|im_end|>"]
    flagged = got.tokens[got.roles == 1].tolist()
    assert flagged.count(im_end) == 2  # the end-of-turn token after each assistant content
    # every flagged ordinary token decodes inside an assistant content, and the first token after is <|im_end|>
    ends = np.flatnonzero(np.diff(np.concatenate([[0], got.roles, [0]]).astype(int)) == -1)
    assert all(got.tokens[e - 1] == im_end for e in ends)


def test_train_on_last_assistant_and_all(engine_tokenizer):
    template = ChatTemplate(QWEN_LIKE, special_tokens=SPECIAL_STRINGS)
    last = ChatEncoder(engine_tokenizer, template, train_on="last-assistant")
    text, got = _flagged_text(last, CONVERSATIONS[1])
    assert text == "bonjour — été ☀"
    every = ChatEncoder(engine_tokenizer, template, train_on="all").encode_conversation(CONVERSATIONS[1], "c")
    assert every.roles.tolist() == [1] * every.tokens.shape[0]
    marked = ChatEncoder(engine_tokenizer, ChatTemplate(QWEN_MARKED, special_tokens=SPECIAL_STRINGS),
                         train_on="last-assistant")
    got = marked.encode_conversation(CONVERSATIONS[1], "c")
    flagged = engine_tokenizer.decode_bytes(got.tokens[got.roles == 1])
    assert flagged.startswith("bonjour".encode()) and got.roles[: len(got.roles) // 2].sum() == 0


def test_specials_in_message_text_are_matched_as_special(engine_tokenizer):
    encoder = ChatEncoder(engine_tokenizer, None)
    ids, starts, ends, special = encoder.tokenize_rendered("a<|im_start|><|im_end|>b<|endoftext|>")
    sp = engine_tokenizer.specials
    assert ids[special].tolist() == [sp["<|im_start|>"], sp["<|im_end|>"], sp["<|endoftext|>"]]
    assert starts[special].tolist() == [1, 13, 24] and ends[special].tolist() == [13, 23, 37]


def test_template_that_changes_the_content_is_an_error(engine_tokenizer):
    upper = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] | upper }}<|im_end|>{% endfor %}"
    encoder = ChatEncoder(engine_tokenizer, ChatTemplate(upper, name="upper.jinja"))
    with pytest.raises(ChatTemplateError, match=r"c.jsonl:7: .*upper.jinja changes an assistant message's content"):
        encoder.encode_conversation(CONVERSATIONS[0], "c.jsonl:7")


def test_trimming_template_is_followed(engine_tokenizer):
    trim = "{% for m in messages %}<|im_start|>{{ m['content'] | trim }}<|im_end|>{% endfor %}"
    encoder = ChatEncoder(engine_tokenizer, ChatTemplate(trim))
    text, _ = _flagged_text(encoder, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "  an answer "}])
    assert text == "an answer"


def test_template_that_raises_or_shows_no_assistant_is_an_error(engine_tokenizer):
    raising = "{{ raise_exception('only user and assistant roles are supported') }}"
    with pytest.raises(ChatTemplateError, match=r"c.jsonl:3: the chat template r.jinja raised: only user"):
        ChatEncoder(engine_tokenizer, ChatTemplate(raising, name="r.jinja")).encode_conversation(CONVERSATIONS[0],
                                                                                                 "c.jsonl:3")
    users = "{% for m in messages %}{% if m['role'] == 'user' %}{{ m['content'] }}{% endif %}{% endfor %}"
    with pytest.raises(ChatTemplateError, match="renders 0 of 1 assistant"):
        ChatEncoder(engine_tokenizer, ChatTemplate(users)).encode_conversation(CONVERSATIONS[0], "c")
    no_generation = "{% for m in messages %}{{ m['content'] }}{% endfor %}{% generation %}{% endgeneration %}"
    with pytest.raises(ChatTemplateError, match="renders no assistant content"):
        ChatEncoder(engine_tokenizer, ChatTemplate(no_generation)).encode_conversation(CONVERSATIONS[0], "c")


def test_sandbox_and_helpers(engine_tokenizer):
    import jinja2

    t = ChatTemplate("{{ messages | tojson }}|{{ bos_token }}|{{ strftime_now('%Y') | length }}")
    text, _ = t.render([{"role": "user", "content": "<é>", "name": None}])
    assert text == '[{"role": "user", "content": "<é>"}]||4'
    with pytest.raises(ChatTemplateError, match="SecurityError|unsafe|access"):
        ChatTemplate("{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}").render([])
    assert jinja2  # the sandbox is jinja2's


def test_prompt_completion_encoded_apart(engine_tokenizer):
    encoder = ChatEncoder(engine_tokenizer, None, bos_id=7, eos_id=3)
    got = encoder.encode_prompt_completion("The answer is", "42.")
    p, c = engine_tokenizer.encode("The answer is"), engine_tokenizer.encode("42.")
    assert got.tokens.tolist() == [7, *p.tolist(), *c.tolist(), 3]
    assert got.roles.tolist() == [0] * (1 + len(p)) + [1] * (len(c) + 1)
    assert encoder.encode_prompt_completion("Th", "e").joint_differs  # "The" is one token, "Th" + "e" two
    assert not encoder.encode_prompt_completion("Hello", " world").joint_differs
    none = ChatEncoder(engine_tokenizer, None, bos_id=None, eos_id=3).encode_prompt_completion("a", " b")
    assert none.tokens[0] != 7 and none.roles[0] == 0 and none.tokens[-1] == 3


def test_load_chat_template_from_config_and_folder(tmp_path):
    import json

    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": [{"name": "default", "template": "{{ bos_token }}x"}],
         "bos_token": {"content": "<s>"}, "eos_token": "</s>"}))
    t = load_chat_template(tmp_path)
    assert t.render([])[0] == "<s>x"
    (tmp_path / "t.jinja").write_text("{{ eos_token }}")
    assert load_chat_template(tmp_path / "t.jinja").render([])[0] == "</s>"


@pytest.mark.parametrize("name", ["qwen2_5", "qwen2_5_training", "llama3", "llama3_training", "phi3", "gemma3"])
@pytest.mark.parametrize("train_on", ["assistant", "last-assistant", "all"])
def test_batched_encoding_equals_the_plain_twin(name, train_on, engine_tokenizer):
    import json

    from tests import naive_chat
    from tests.chat_helpers import ROOT

    conversations = CONVERSATIONS + [json.loads(line)["messages"]
                                     for line in (ROOT / "data" / "chat.jsonl").read_text().splitlines()[:40]]
    encoder = ChatEncoder(engine_tokenizer, ChatTemplate(trl_template(name), special_tokens=SPECIAL_STRINGS),
                          train_on=train_on)
    values, offsets, roles = encoder.encode_many(conversations, ["c"] * len(conversations))
    assert offsets.shape == (len(conversations) + 1,) and offsets[-1] == values.shape[0] == roles.shape[0]
    for i, conversation in enumerate(conversations):
        ids, flags = naive_chat.encode_conversation(encoder, conversation)
        assert values[offsets[i]:offsets[i + 1]].tolist() == ids.tolist()
        assert roles[offsets[i]:offsets[i + 1]].tolist() == flags.tolist()


def test_assistant_tool_call_without_content(tokenizer_json, engine_tokenizer):
    source = trl_template("qwen2_5")
    call = {"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    conversation = [{"role": "user", "content": "add 1 and 2"},
                    {"role": "assistant", "tool_calls": [call]},
                    {"role": "tool", "content": "3"},
                    {"role": "assistant", "content": "It is 3."}]
    reference = hf_tokenizer(tokenizer_json, source)
    encoder = ChatEncoder(engine_tokenizer, ChatTemplate(source, special_tokens=SPECIAL_STRINGS))
    got = encoder.encode_conversation(conversation, "c")
    assert got.tokens.tolist() == reference.apply_chat_template(conversation, tokenize=True,
                                                                return_dict=True)["input_ids"]
    flagged = engine_tokenizer.decode_bytes(got.tokens[got.roles == 1])
    assert flagged == b"It is 3."  # the content, then <|im_end|> (a special: no bytes of text)


_PIECES = ["a", "b", " ", "  ", "\n", "\t", "é", "☀", "𝄞", "The", " the", "<|im_end|>", "<|im_start|>", "<|eot_id|>",
           "<|im", "|>", "0", "12", "!", "'s", "\r\n"]


def _content():
    from hypothesis import strategies as st

    return st.lists(st.sampled_from(_PIECES), min_size=0, max_size=8).map("".join)


def _conversation():
    from hypothesis import strategies as st

    turn = st.tuples(_content(), _content().filter(bool))
    return st.lists(turn, min_size=1, max_size=3).map(
        lambda turns: [m for q, a in turns for m in ({"role": "user", "content": q},
                                                      {"role": "assistant", "content": a})])


@pytest.mark.parametrize("source", [QWEN_MARKED, QWEN_LIKE], ids=["markers", "no-markers"])
def test_random_conversations_equal_transformers_and_the_plain_twin(source, tokenizer_json, engine_tokenizer):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tests import naive_chat

    template = ChatTemplate(source, special_tokens=SPECIAL_STRINGS)
    reference = hf_tokenizer(tokenizer_json, source)
    encoder = ChatEncoder(engine_tokenizer, template)

    @settings(max_examples=60, deadline=None)
    @given(st.lists(_conversation(), min_size=1, max_size=4))
    def check(conversations):
        values, offsets, roles = encoder.encode_many(conversations, ["c"] * len(conversations))
        for i, conversation in enumerate(conversations):
            ids, flags = naive_chat.encode_conversation(encoder, conversation)
            got_ids, got_flags = values[offsets[i]:offsets[i + 1]].tolist(), roles[offsets[i]:offsets[i + 1]].tolist()
            assert got_ids == ids.tolist() and got_flags == flags.tolist()
            expected = reference.apply_chat_template(conversation, tokenize=True, return_dict=True,
                                                     return_assistant_tokens_mask=template.has_generation)
            assert got_ids == list(expected["input_ids"])
            if template.has_generation:
                assert got_flags == list(expected["assistant_masks"])

    check()
