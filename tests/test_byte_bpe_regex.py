"""Byte-level BPE with any pre-tokenizer regex (engine.tokenizers.byte_bpe, interop, loading, the CLI):
Llama 3's, Qwen2's and tekken's patterns encode exactly as tiktoken (same ranks and pat_str) and
Hugging Face tokenizers (Split(Regex) + ByteLevel) do; training with a regex, export to tokenizer.json,
import of tokenizer.json files with such a Split, tiktoken files with ``pattern=REGEX``, engine files,
pickling, long documents, and ``--pattern REGEX`` on the command line."""

import json
import pickle

import numpy as np
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.errors import TokenizerError
from engine.pipeline import prepare
from engine.store import TokenStore
from engine.tokenizers.byte_bpe import ByteBpeTokenizer, ByteBpeTrainer
from engine.tokenizers.interop import load_hf_tokenizer_json, load_tiktoken, save_hf_tokenizer_json, save_tiktoken
from engine.tokenizers.loading import load_tokenizer
from tests.naive_byte_bpe import stdlib_texts
from tests.test_regex import DEEPSEEK, LLAMA3, QWEN2, SAMPLES, TEKKEN

tiktoken = pytest.importorskip("tiktoken", reason="needs the test extra (pip install -e '.[test]')")
hf_tokenizers = pytest.importorskip("tokenizers", reason="needs the test extra (pip install -e '.[test]')")
HfTokenizer = hf_tokenizers.Tokenizer

ADVERSARIAL = ["a" * 20_000, " " * 5000 + "x", "\t \n\r\n \x0b\x0c\x85\xa0\u2028\u3000 end", "😀" * 300 + "👍🏽🇫🇷",
               "\x00\x00abc\x00", "line\r\nline\r\n\r\n", "don't I'LL 'S THEY'RE", "1234567890" * 50, "ſ'ſ", "", " ",
               "mixed  \t\n  whitespace\n\n\n   x", "中文字符" * 100, "e\u0301" * 200, "'" * 99, *SAMPLES]
PATTERNS = {"llama3": LLAMA3, "qwen2": QWEN2, "tekken": TEKKEN}


def corpus_texts(shakespeare_text: str) -> list[str]:
    from engine.pipeline import default_corpus_paths

    corpus, _ = default_corpus_paths()
    bundled = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8") if line.strip()]
    return [shakespeare_text[200_000:260_000], *stdlib_texts(200_000), *bundled, *ADVERSARIAL]


@pytest.fixture(scope="module", params=list(PATTERNS))
def trained(request, shakespeare_text):
    pattern = PATTERNS[request.param]
    return pattern, ByteBpeTrainer(vocab_size=1200, pattern=pattern, tie_break="hf").train([shakespeare_text[:200_000]])


def test_trained_tokenizer_keeps_the_regex(trained):
    pattern, tok = trained
    assert tok.pattern == pattern and tok.vocab_size == 1200


def test_tiktoken_file_with_the_regex_equals_tiktoken(trained, tmp_path, shakespeare_text):
    pattern, tok = trained
    from_ranks = load_tiktoken(save_tiktoken(tok, tmp_path / "r.tiktoken"), pattern=pattern)
    assert from_ranks.pattern == pattern
    ranks = {t: i for i, t in enumerate(from_ranks.tokens) if t is not None}
    enc = tiktoken.Encoding("regex-test", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    texts = corpus_texts(shakespeare_text)
    got = from_ranks.encode_batch(texts, threads=2)
    for text, ids in zip(texts, got):
        assert ids.tolist() == enc.encode_ordinary(text), text[:60]
    assert [a.tolist() for a in tok.encode_batch(texts)] == [a.tolist() for a in got]  # merges = ranks here


def test_export_to_tokenizer_json_encodes_identically_in_hugging_face(trained, tmp_path, shakespeare_text):
    pattern, tok = trained
    path = save_hf_tokenizer_json(tok, tmp_path / "tokenizer.json")
    split = json.loads(path.read_text())["pre_tokenizer"]["pretokenizers"][0]
    assert split == {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
    hf = HfTokenizer.from_file(str(path))
    texts = corpus_texts(shakespeare_text)
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert [a.tolist() for a in tok.encode_batch(texts)] == want
    again = load_hf_tokenizer_json(path)
    assert again.pattern == pattern and [a.tolist() for a in again.encode_batch(texts)] == want


def test_engine_file_and_pickle_keep_the_regex(trained, tmp_path):
    pattern, tok = trained
    text = "".join(ADVERSARIAL)
    loaded = load_tokenizer(tok.save(tmp_path / "tok.json"))
    assert loaded.pattern == pattern and np.array_equal(loaded.encode(text), tok.encode(text))
    copy = pickle.loads(pickle.dumps(tok))
    assert np.array_equal(copy.encode(text), tok.encode(text))


def test_hugging_face_trained_file_with_a_split_regex_loads(tmp_path, shakespeare_text):
    """A tokenizer.json written by Hugging Face (Qwen2 style: Split(Regex) + ByteLevel(use_regex=false))."""
    pre = hf_tokenizers.pre_tokenizers
    for pattern in (QWEN2, TEKKEN, DEEPSEEK[1]):
        hf = HfTokenizer(hf_tokenizers.models.BPE())
        hf.pre_tokenizer = pre.Sequence([pre.Split(hf_tokenizers.Regex(pattern), "isolated", invert=False),
                                         pre.ByteLevel(add_prefix_space=False, use_regex=False)])
        trainer = hf_tokenizers.trainers.BpeTrainer(vocab_size=800, special_tokens=["<|endoftext|>"],
                                                    show_progress=False, initial_alphabet=pre.ByteLevel.alphabet())
        hf.train_from_iterator([shakespeare_text[:150_000]], trainer)
        path = tmp_path / "hf.json"
        hf.save(str(path))
        ours = load_tokenizer(path)
        assert ours.pattern == pattern
        texts = corpus_texts(shakespeare_text)
        assert [a.tolist() for a in ours.encode_batch(texts)] == [
            e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]


def test_tokenizer_json_with_an_unsupported_split_regex_names_it(tmp_path, trained):
    _, tok = trained
    path = save_hf_tokenizer_json(tok, tmp_path / "t.json")
    data = json.loads(path.read_text())
    data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"(?<=\s)\w+|\s+"
    path.write_text(json.dumps(data))
    with pytest.raises(TokenizerError) as info:
        load_hf_tokenizer_json(path)
    assert str(info.value).startswith(f"{path}: pre_tokenizer Split regex: lookbehind at offset 0")


def test_load_tokenizer_takes_a_regex_for_a_tiktoken_file(trained, tmp_path):
    pattern, tok = trained
    path = save_tiktoken(tok, tmp_path / "r.tiktoken")
    loaded = load_tokenizer(path, pattern=pattern)
    assert loaded.pattern == pattern and loaded.notes[0] == f"tiktoken rank file: pre-tokenizer pattern {pattern}"
    assert load_tokenizer(path, pattern=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
                          ).pattern == "gpt2"  # tiktoken's spelling of GPT-2's pattern: the fast path


@pytest.mark.parametrize("looks_back", [False, True])
def test_long_documents_are_cut_where_pieces_are_final(trained, monkeypatch, looks_back, shakespeare_text):
    """Spans end at final piece ends (a regex with \\b is never cut): ids as if encoded at once."""
    import engine.tokenizers.streaming as streaming

    pattern, tok = trained
    if looks_back:
        tok = ByteBpeTokenizer(tok.tokens, merges=tok.merges, specials=tok.specials, pattern=r"\b\w+\b|\W+")
    text = shakespeare_text[:30_000] + "".join(ADVERSARIAL)
    whole = tok.encode(text)
    calls = []
    real = tok._encode_span
    monkeypatch.setattr(tok, "_encode_span", lambda *args: calls.append(1) or real(*args))
    values, offsets = tok.encode_documents([text, "short"], ["long", "s"], stream_chars=1000)
    assert values[offsets[0] + 1:offsets[1] - 1].tolist() == whole.tolist()
    assert (len(calls) == 1) if looks_back else (len(calls) > 20)
    # Fitting: windows that hold the longest piece (the 20,000 a's) give the whole text's types; a regex
    # with no known safe cut is counted in parts of stream_chars characters (streaming's fitting rule).
    trainer = ByteBpeTrainer(merges=5, pattern=tok.pattern)
    spans = [span for batch in streaming.training_batches(trainer, [[text]], stream_chars=25_000) for span in batch]
    assert "".join(spans) == text and len(spans) > 1
    if looks_back:
        assert [len(s) for s in spans[:-1]] == [25_000] * (len(spans) - 1)
    else:
        words, counts = trainer.count_types(spans)
        whole_words, whole_counts = trainer.count_types([text])
        assert words == whole_words and counts.tolist() == whole_counts.tolist()


def test_regex_equal_to_a_named_pattern_is_that_name():
    from engine.tokenizers.pretokenize import PATTERNS as NAMED

    tok = ByteBpeTrainer(merges=5, pattern=NAMED["cl100k"]).train(["hello world"])
    assert tok.pattern == "cl100k"
    with pytest.raises(TokenizerError, match=r"'gpt5' is unknown \(expected one of: gpt2, cl100k, o200k, llama3, qwen2, "
                                             r"tekken, or a regex"):
        ByteBpeTokenizer([bytes([b]) for b in range(256)], specials={"<bos>": 256, "<eos>": 257}, pattern="gpt5")


def test_cli_train_import_and_prepare_take_a_regex(tmp_path, shakespeare_text):
    corpus = tmp_path / "play.txt"
    corpus.write_text(shakespeare_text[:40_000], encoding="utf-8")
    out = tmp_path / "byte.json"
    result = CliRunner().invoke(main, ["tokenizers", "train", str(corpus), "--kind", "bpe", "--level", "byte",
                                       "--merges", "50", "--pattern", LLAMA3, "--out", str(out)])
    assert result.exit_code == 0, result.output
    tok = load_tokenizer(out)
    assert tok.pattern == LLAMA3
    ranks = save_tiktoken(tok, tmp_path / "r.tiktoken")
    imported = tmp_path / "imported.json"
    result = CliRunner().invoke(main, ["tokenizers", "import", str(ranks), "--pattern", QWEN2, "--special",
                                       "<|endoftext|>=400", "--out", str(imported)])
    assert result.exit_code == 0, result.output
    assert load_tokenizer(imported).pattern == QWEN2
    result = CliRunner().invoke(main, ["tokenizers", "train", str(corpus), "--kind", "bpe", "--level", "byte",
                                       "--merges", "5", "--pattern", r"(?<=a)b", "--out", str(tmp_path / "x.json")])
    assert result.exit_code == 2
    assert "--pattern: lookbehind at offset 0 of the regex '(?<=a)b'" in result.output
    from engine.pipeline import default_corpus_paths

    bundled, splits = default_corpus_paths()
    result = CliRunner().invoke(main, ["prepare", str(bundled), "--splits", str(splits), "--tokenizer", "byte-bpe",
                                       "--vocab-size", "300", "--pattern", QWEN2, "--out", str(tmp_path / "o"),
                                       "--quiet"])
    assert result.exit_code == 0, result.output
    assert load_tokenizer(tmp_path / "o" / "tokenizer.json").pattern == QWEN2
    result = CliRunner().invoke(main, ["prepare", str(bundled), "--splits", str(splits), "--tokenizer", "byte-bpe",
                                       "--pattern", "[a", "--out", str(tmp_path / "p"), "--quiet"])
    assert result.exit_code == 2
    assert "--pattern: an unterminated class '[' at offset 0 of the regex '[a'" in result.output


def test_prepare_with_a_regex_equals_the_trainer_by_hand(tmp_path):
    from engine.corpus import Partition
    from engine.pipeline import default_corpus_paths

    corpus, splits = default_corpus_paths()
    result = prepare(corpus, splits, tmp_path / "o", tokenizer="byte-bpe", vocab_size=300, pattern=TEKKEN,
                     context_length=8, quiet=True)
    assert result.report["tokenizer"]["kind"] == "bpe-byte"
    texts = {d["id"]: d["text"] for d in map(json.loads, open(corpus, encoding="utf-8")) if d}
    train_ids = json.loads(open(splits, encoding="utf-8").read())["train"]
    by_hand = ByteBpeTrainer(vocab_size=300, pattern=TEKKEN).train([texts[i] for i in train_ids])
    tok = load_tokenizer(tmp_path / "o" / "tokenizer.json")
    assert tok.pattern == TEKKEN and tok.tokens == by_hand.tokens
    store = TokenStore.open(tmp_path / "o" / "store")
    for part in Partition:
        for doc_id, doc in zip(store.ids(part), store.documents(part)):
            assert doc.tokens.tolist() == by_hand.encode_document(texts[doc_id]).tolist()
