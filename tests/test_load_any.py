"""`prepare --tokenizer FILE` and `load_tokenizer` recognise engine files, Hugging Face
tokenizer.json and tiktoken rank files by their content; ids equal the libraries' own."""

import json

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Partition
from engine.errors import TokenizerError
from engine.pipeline import default_corpus_paths
from engine.store import TokenStore
from engine.tokenizers.base import load_tokenizer
from engine.tokenizers.interop import save_tiktoken
from engine.tokenizers.pretokenize import PATTERNS

tiktoken = pytest.importorskip("tiktoken", reason="needs the bench extra (pip install -e '.[bench]')")
hf_tokenizers = pytest.importorskip("tokenizers", reason="needs the bench extra (pip install -e '.[bench]')")


def corpus_texts():
    corpus, splits = default_corpus_paths()
    docs = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    return corpus, splits, {d["id"]: d["text"] for d in docs}


@pytest.fixture(scope="module")
def hf_file(tmp_path_factory):
    _, _, texts = corpus_texts()
    tok = hf_tokenizers.Tokenizer(hf_tokenizers.models.BPE())
    tok.pre_tokenizer = hf_tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = hf_tokenizers.decoders.ByteLevel()
    trainer = hf_tokenizers.trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=hf_tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(texts.values()), trainer)
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    tok.save(str(path))
    return tok, path


def prepared_ids(tmp_path, tokenizer_file):
    corpus, splits, _ = corpus_texts()
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["prepare", str(corpus), "--splits", str(splits), "--tokenizer", str(tokenizer_file),
                                       "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    store = TokenStore.open(out / "store")
    ids = {}
    for part in Partition:
        values, offsets = store.arrays(part)
        for i, doc_id in enumerate(store.ids(part)):
            ids[doc_id] = values[offsets[i]:offsets[i + 1]].tolist()
    return ids, result.output


def test_hf_tokenizer_json_works_directly_in_prepare(tmp_path, hf_file):
    hf, path = hf_file
    _, _, texts = corpus_texts()
    ids, output = prepared_ids(tmp_path, path)
    eot = hf.token_to_id("<|endoftext|>")
    assert eot == 0
    for doc_id, text in texts.items():
        assert ids[doc_id] == [eot] + hf.encode(text, add_special_tokens=False).ids + [eot], doc_id
    assert "note:" not in output


def test_tiktoken_file_works_directly_in_prepare(tmp_path, hf_file):
    _, path = hf_file
    ours = load_tokenizer(path)
    ranks_file = save_tiktoken(ours, tmp_path / "ranks.tiktoken")
    ranks = {t: i for i, t in enumerate(ours.tokens) if t is not None}
    size = max(ranks.values()) + 1
    enc = tiktoken.Encoding("bundled600", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": size})
    _, _, texts = corpus_texts()
    ids, output = prepared_ids(tmp_path, ranks_file)
    for doc_id, text in texts.items():
        assert ids[doc_id] == [size] + enc.encode_ordinary(text) + [size], doc_id
    assert "note: tiktoken rank file: pre-tokenizer pattern gpt2 (pass pattern= to choose another)" in output
    assert f"note: the file names no special tokens: <|endoftext|> added as id {size}, wrapping every document" in output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(report["tokenizer"]["notes"]) == 2


def test_load_tokenizer_tells_formats_apart(tmp_path, hf_file):
    _, path = hf_file
    assert load_tokenizer(path).kind == "bpe-byte"
    ranks_file = save_tiktoken(load_tokenizer(path), tmp_path / "r.tiktoken")
    assert load_tokenizer(ranks_file, pattern="cl100k").pattern == "cl100k"
    (tmp_path / "junk.txt").write_text("not a tokenizer at all\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match="junk.txt: not a tokenizer file: expected JSON .* or a tiktoken rank file"):
        load_tokenizer(tmp_path / "junk.txt")


def test_hf_tokenizer_json_without_specials_gets_endoftext_like_tiktoken(tmp_path):
    _, _, texts = corpus_texts()
    tok = hf_tokenizers.Tokenizer(hf_tokenizers.models.BPE())
    tok.pre_tokenizer = hf_tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = hf_tokenizers.decoders.ByteLevel()
    trainer = hf_tokenizers.trainers.BpeTrainer(vocab_size=500, show_progress=False,
                                                initial_alphabet=hf_tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(texts.values()), trainer)
    path = tmp_path / "plain.json"
    tok.save(str(path))
    assert json.loads(path.read_text())["added_tokens"] == []
    size = tok.get_vocab_size()
    ids, output = prepared_ids(tmp_path, path)
    for doc_id, text in texts.items():
        assert ids[doc_id] == [size] + tok.encode(text, add_special_tokens=False).ids + [size], doc_id
    assert f"note: the file names no special tokens: <|endoftext|> added as id {size}, wrapping every document" in output
    assert load_tokenizer(path).specials == {"<|endoftext|>": size}
