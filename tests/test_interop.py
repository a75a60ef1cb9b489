"""engine.tokenizers.interop against the peers (needs the bench extra): the same ranks give the same ids
in engine, tiktoken and HF; `prepare --tokenizer FILE` and `load_tokenizer` recognise engine files,
Hugging Face tokenizer.json and tiktoken rank files by their content."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.commands._tokenizers_import import import_command
from engine.corpus import Partition
from engine.errors import TokenizerError
from engine.pipeline import default_corpus_paths
from engine.store import TokenStore
from engine.tokenizers.loading import load_tokenizer
from engine.tokenizers.interop import load_hf_tokenizer_json, load_tiktoken, save_hf_tokenizer_json, save_tiktoken
from engine.tokenizers.pretokenize import PATTERNS
from tests.naive_byte_bpe import stdlib_texts

tiktoken = pytest.importorskip("tiktoken", reason="needs the bench extra (pip install -e '.[bench]')")
hf_tokenizers = pytest.importorskip("tokenizers", reason="needs the bench extra (pip install -e '.[bench]')")
HfTokenizer = hf_tokenizers.Tokenizer
models, pre_tokenizers, trainers = hf_tokenizers.models, hf_tokenizers.pre_tokenizers, hf_tokenizers.trainers

ADVERSARIAL = ["a" * 20_000, " " * 5000 + "x", "\t \n\r\n \x0b\x0c\x85\xa0\u2028\u3000 end", "😀" * 300 + "👍🏽🇫🇷",
               "\x00\x00abc\x00", "line\r\nline\r\n\r\n", "don't I'LL 'S", "1234567890" * 50, "ſ'ſ", "", " ",
               "mixed  \t\n  whitespace\n\n\n   x", "中文字符" * 100, "e\u0301" * 200, "'" * 99]

O200K_TEXTS = ["HELLOworld helloWORLD HelloWorld", "don'T DON'T I'M we'Re they'VE she'LL it'ſ", "ǅemo ǄEMO aǅb ᾈᾀ",
               "e\u0301\u0301 E\u0301X \u0301ABC \u0301abc !!\u0301", "1 12 123 1234 1234567 ١٢٣٤ Ⅷ12 x123y",
               "a\r\n\r\n  b \r\n\n\t x  ", "!/ !\n/\n/x a/b //x", "(HELLO) $HELLO #Hashtag 😀HELLO ’S ’s", "trailing   "]


@pytest.fixture(scope="module")
def hf_pair(tmp_path_factory, shakespeare_text):
    """A 4,096-vocabulary HF tokenizer trained on Tiny Shakespeare, and its file."""
    tok = HfTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=4096, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([shakespeare_text], trainer)
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    tok.save(str(path))
    return tok, path


@pytest.fixture(scope="module")
def three(hf_pair, tmp_path_factory):
    hf, path = hf_pair
    ours = load_hf_tokenizer_json(path)
    ranks = {t: i for i, t in enumerate(ours.tokens) if t is not None}
    enc = tiktoken.Encoding("shakespeare4096", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 0})
    rank_file = save_tiktoken(ours, tmp_path_factory.mktemp("tt") / "ranks.tiktoken")
    from_ranks = load_tiktoken(rank_file, special_tokens={"<|endoftext|>": 0})
    return hf, ours, enc, from_ranks


def check_all_equal(three, texts):
    hf, ours, enc, from_ranks = three
    want = enc.encode_ordinary_batch(texts)
    got = ours.encode_batch(texts, threads=2)
    got_ranks = from_ranks.encode_batch(texts)
    got_hf = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    for i, text in enumerate(texts):
        assert got[i].tolist() == want[i] == got_hf[i] == got_ranks[i].tolist(), f"text {i}: {text[:60]!r}"


def test_imported_ids_and_wrappers(three):
    _, ours, _, from_ranks = three
    assert ours.vocab_size == 4096 and ours.bos_id == ours.eos_id == 0 and ours.bos == "<|endoftext|>"
    assert ours.encode_document("hi").tolist()[0] == 0 and ours.encode_document("hi").tolist()[-1] == 0
    assert from_ranks.tokens == ours.tokens and from_ranks.merges is None


def test_same_ids_on_shakespeare(three, shakespeare_text):
    check_all_equal(three, [shakespeare_text] + shakespeare_text.split("\n\n"))


@pytest.mark.slow
def test_same_ids_on_stdlib_documents(three):
    # every 4th UTF-8 .py file of the standard library (~8 MB; all of them pass too, in ~90 s)
    check_all_equal(three, stdlib_texts()[::4])


def test_same_ids_on_adversarial_strings(three):
    check_all_equal(three, ADVERSARIAL)


def test_lone_surrogate_rejected(three):
    with pytest.raises(TokenizerError, match="lone surrogate U\\+D83D"):
        three[1].encode("ok \ud83d")


def test_export_tokenizer_json_loads_in_hf_with_same_ids(three, tmp_path, shakespeare_text):
    _, ours, enc, from_ranks = three
    for source in (ours, from_ranks):
        path = save_hf_tokenizer_json(source, tmp_path / "out.json")
        reloaded = HfTokenizer.from_file(str(path))
        text = shakespeare_text[:200_000] + "".join(ADVERSARIAL)
        assert reloaded.encode(text, add_special_tokens=False).ids == enc.encode_ordinary(text)
        again = load_hf_tokenizer_json(path)
        assert np.array_equal(again.encode(text), ours.encode(text))


@pytest.mark.parametrize("pattern", ["cl100k", "o200k"])
def test_pattern_round_trip(pattern, tmp_path, shakespeare_text):
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    ours = ByteBpeTrainer(vocab_size=1000, pattern=pattern).train([shakespeare_text])
    path = save_hf_tokenizer_json(ours, tmp_path / f"{pattern}.json")
    hf = HfTokenizer.from_file(str(path))
    text = shakespeare_text[:100_000] + "".join(ADVERSARIAL) + "".join(O200K_TEXTS)
    assert hf.encode(text, add_special_tokens=False).ids == ours.encode(text).tolist()
    assert load_hf_tokenizer_json(path).pattern == pattern


def test_merges_as_strings_accepted(hf_pair, tmp_path):
    _, path = hf_pair
    data = json.loads(path.read_text())
    data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
    (tmp_path / "strings.json").write_text(json.dumps(data))
    a, b = load_hf_tokenizer_json(tmp_path / "strings.json"), load_hf_tokenizer_json(path)
    assert a.merges == b.merges and len(a.merges) == 4096 - 257


def test_malformed_files(tmp_path, hf_pair):
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("IQ== 0\nIg== 1\nnot-base64! 2\n")
    with pytest.raises(TokenizerError, match="bad.tiktoken:3: 'not-base64!' is not valid base64"):
        load_tiktoken(bad)
    bad.write_text("IQ== 0\nIg== x\n")
    with pytest.raises(TokenizerError, match=":2: rank 'x' is not an integer"):
        load_tiktoken(bad)
    bad.write_text("IQ== 0\nIQ== 1\n")
    with pytest.raises(TokenizerError, match=":2: token b'!' appears twice"):
        load_tiktoken(bad)
    bad.write_text("IQ== 0\n")
    with pytest.raises(TokenizerError) as info:
        load_tiktoken(bad)
    assert str(info.value) == f"{bad}: vocabulary lacks the single byte 0x00 (a byte-level vocabulary needs all 256)"
    js = tmp_path / "bad.json"
    js.write_text("{not json")
    with pytest.raises(TokenizerError, match="bad.json: not valid JSON"):
        load_hf_tokenizer_json(js)
    data = json.loads(hf_pair[1].read_text())
    data["model"]["type"] = "WordPiece"
    js.write_text(json.dumps(data))
    with pytest.raises(TokenizerError, match="expected a \"model\" of type \"BPE\""):
        load_hf_tokenizer_json(js)
    with pytest.raises(TokenizerError, match="bos token '<nope>' is not a special token"):
        load_hf_tokenizer_json(hf_pair[1], bos="<nope>", eos="<nope>")


def test_cli_import_both_formats(hf_pair, tmp_path, three):
    runner = CliRunner()
    out = tmp_path / "engine.json"
    result = runner.invoke(import_command, [str(hf_pair[1]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "tokenizer.json" in result.output and "vocab_size 4096" in result.output
    assert load_tokenizer(out) == three[1]
    ranks = save_tiktoken(three[1], tmp_path / "r.tiktoken")
    result = runner.invoke(import_command, [str(ranks), "--special", "<|endoftext|>=0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert load_tokenizer(out) == three[3]
    result = runner.invoke(import_command, [str(ranks), "--special", "oops", "--out", str(out)])
    assert result.exit_code != 0 and "expected TOKEN=ID" in str(result.exception)
    result = runner.invoke(import_command, [str(ranks), "--pattern", "o200k", "--special", "<|endoftext|>=0",
                                            "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert load_tokenizer(out).pattern == "o200k"


def test_cli_pattern_options_take_a_name_or_a_regex():
    from engine.commands.prepare import command as prepare_command
    from engine.commands.tokenizers import train

    for cmd in (import_command, train, prepare_command):
        option = next(p for p in cmd.params if p.name == "pattern")
        assert option.metavar == "NAME|REGEX" and all(name in option.help for name in PATTERNS), cmd.name
        assert "or any regex, e.g. --pattern" in option.help, cmd.name


def test_o200k_pattern_ids_equal_tiktoken(tmp_path, shakespeare_text):
    """tiktoken-style ranks with the o200k pattern: load_tokenizer(..., pattern="o200k") encodes as tiktoken."""
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    corpus_path = Path(__file__).resolve().parent.parent / "data" / "corpus.jsonl"
    corpus = [json.loads(line)["text"] for line in corpus_path.read_text(encoding="utf-8").splitlines()]
    trained = ByteBpeTrainer(vocab_size=2000, pattern="o200k").train([shakespeare_text] + corpus)
    rank_file = save_tiktoken(trained, tmp_path / "o200k_style.tiktoken")
    ours = load_tokenizer(rank_file, pattern="o200k")
    assert ours.pattern == "o200k" and ours.notes[0] == "tiktoken rank file: pre-tokenizer pattern o200k"
    ranks = {t: i for i, t in enumerate(ours.tokens) if t is not None}
    enc = tiktoken.Encoding("o200k_style", pat_str=PATTERNS["o200k"], mergeable_ranks=ranks, special_tokens={})
    texts = ([shakespeare_text] + shakespeare_text.split("\n\n")[:2000] + corpus + ADVERSARIAL + O200K_TEXTS
             + stdlib_texts(300_000) + ["\n".join(corpus) * 3 + "".join(O200K_TEXTS) * 20])
    want = enc.encode_ordinary_batch(texts)
    got = ours.encode_batch(texts, threads=2)
    for i, text in enumerate(texts):
        assert got[i].tolist() == want[i], f"text {i}: {text[:60]!r}"
    assert np.array_equal(trained.encode(shakespeare_text), ours.encode(shakespeare_text))


def test_o200k_base_sized_rank_file_defaults_to_o200k(tmp_path):
    """A rank file of exactly 199,998 ranks (o200k_base's count) is read with the o200k pattern."""
    import base64
    import itertools

    tokens = [bytes([i]) for i in range(256)] + [bytes(pair) for pair in itertools.product(range(256), repeat=2)]
    tokens += [bytes(t) for t in itertools.islice(itertools.product(range(256), repeat=3), 199_998 - len(tokens))]
    path = tmp_path / "o200k_sized.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode('ascii')} {i}\n" for i, t in enumerate(tokens)),
                    encoding="ascii")
    tok = load_tokenizer(path)
    assert tok.pattern == "o200k"
    assert tok.notes[0] == "tiktoken rank file: pre-tokenizer pattern o200k (pattern= / --pattern chooses another)"
    enc = tiktoken.Encoding("o200k_sized", pat_str=PATTERNS["o200k"],
                            mergeable_ranks={t: i for i, t in enumerate(tokens)}, special_tokens={})
    text = "".join(O200K_TEXTS) + "".join(ADVERSARIAL[:12])
    assert tok.encode(text).tolist() == enc.encode_ordinary(text)


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
    assert "note: tiktoken rank file: pre-tokenizer pattern gpt2 (pattern= / --pattern chooses another)" in output
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


def test_empty_rank_is_reserved(three, tmp_path, shakespeare_text):
    """Whisper's rank files write one rank as ``=`` (the empty token); tiktoken reads it as a rank no
    text encodes to, and so does engine: same ids, the rank decodes to nothing, the added
    ``<|endoftext|>`` comes after it, and writing the file back keeps the rank."""
    from tiktoken.load import load_tiktoken_bpe

    _, ours, _, _ = three
    lines = save_tiktoken(ours, tmp_path / "r.tiktoken").read_text().splitlines()
    size = len(ours.tokens)  # the next rank
    path = tmp_path / "whisper-like.tiktoken"
    path.write_text("\n".join(lines + [f"= {size}"]) + "\n")
    tok = load_tiktoken(path)
    ranks = load_tiktoken_bpe(str(path))
    assert ranks[b""] == size
    enc = tiktoken.Encoding("reserved", pat_str=PATTERNS["gpt2"], mergeable_ranks=ranks, special_tokens={})
    text = shakespeare_text[:50_000] + "".join(ADVERSARIAL)
    assert tok.encode(text).tolist() == enc.encode_ordinary(text)
    assert tok.specials == {"<|endoftext|>": size + 1} and tok.eos_id == size + 1
    assert tok.decode_bytes([size]) == b"" == enc.decode_bytes([size])
    assert tok.notes[-1] == f"1 empty rank(s) kept as reserved ids that no text encodes to ({size})"
    saved = save_tiktoken(tok, tmp_path / "again.tiktoken").read_text().splitlines()
    assert saved == ["= 0"] + lines + [f"= {size}"]  # every id below the last keeps its place (0 was a gap)
    again = load_tiktoken(tmp_path / "again.tiktoken")
    assert again.tokens == tok.tokens and again.specials == tok.specials
    recognised = load_tokenizer(tmp_path / "again.tiktoken")  # its first line is "= 0": still a rank file
    assert recognised.tokens == tok.tokens and recognised.specials == tok.specials
    path.write_text("\n".join(lines + [f"= {size}", f"= {size}"]) + "\n")
    with pytest.raises(TokenizerError, match=f":{len(lines) + 2}: rank {size} appears twice"):
        load_tiktoken(path)
    path.write_text("\n".join(lines + [f"= {size}"]) + "\n")
    with pytest.raises(TokenizerError, match=f"special token '<x>' id {size} is already a reserved"):
        load_tiktoken(path, special_tokens={"<x>": size})


TEKKEN_PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
                  r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")


def tekken_file(path, vocab, *, n_special, vocab_size, specials=None):
    """A tekken.json as Mistral writes them: the ranks in order, their regex, maybe the specials."""
    import base64 as b64

    data = {"config": {"pattern": TEKKEN_PATTERN, "num_vocab_tokens": len(vocab), "default_vocab_size": vocab_size,
                       "default_num_special_tokens": n_special, "version": "v3" if specials is None else "v7"},
            "vocab": [{"rank": r, "token_bytes": b64.b64encode(t).decode(), "token_str": t.decode("utf-8", "replace")}
                      for r, t in enumerate(vocab)]}
    if specials is not None:
        data["special_tokens"] = [{"rank": i, "token_str": s, "is_control": True} for i, s in enumerate(specials)]
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def tekken_vocab(three):
    """Ranks in tekken's order: the 256 bytes by value, then every longer token in merge order."""
    _, ours, _, _ = three
    return [bytes([b]) for b in range(256)] + [t for t in ours.tokens if t is not None and len(t) > 1]


@pytest.mark.parametrize("listed", [False, True])
def test_tekken_file_encodes_as_mistral_does(listed, tekken_vocab, tmp_path, shakespeare_text):
    """Mistral's Tekkenizer is tiktoken over the first default_vocab_size - n_special ranks, each id
    shifted by n_special; specials listed by the file (or the 20 implicit ones), then fillers."""
    vocab = tekken_vocab
    n_special, kept = (8, len(vocab) - 500) if listed else (20, len(vocab))
    specials = ["<unk>", "<s>", "</s>"] if listed else None
    path = tekken_file(tmp_path / "tekken.json", vocab, n_special=n_special, vocab_size=n_special + kept,
                       specials=specials)
    tok = load_tokenizer(path)
    enc = tiktoken.Encoding("tekken", pat_str=TEKKEN_PATTERN, mergeable_ranks={t: r for r, t in enumerate(vocab[:kept])},
                            special_tokens={})
    text = shakespeare_text[:60_000] + "".join(ADVERSARIAL) + "".join(O200K_TEXTS) + " 12345 ٣٤ x1y"
    assert tok.encode(text).tolist() == [i + n_special for i in enc.encode_ordinary(text)]
    assert (tok.bos, tok.bos_id, tok.eos, tok.eos_id) == ("<s>", 1, "</s>", 2)
    assert tok.vocab_size == n_special + kept
    names = sorted(tok.specials, key=tok.specials.get)
    if listed:
        assert names == ["<unk>", "<s>", "</s>", "<SPECIAL_3>", "<SPECIAL_4>", "<SPECIAL_5>", "<SPECIAL_6>", "<SPECIAL_7>"]
    else:
        assert names[:4] == ["<unk>", "<s>", "</s>", "[INST]"] and names[-1] == "[TOOL_CONTENT]" and len(names) == 20
    assert tok.decode(tok.encode(text)) == text
    out = tmp_path / "engine.json"
    result = CliRunner().invoke(main, ["tokenizers", "import", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert load_tokenizer(out) == tok
    result = CliRunner().invoke(main, ["tokenizers", "import", str(path), "--bos", "<unk>", "--eos", "<unk>",
                                       "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (load_tokenizer(out).bos_id, load_tokenizer(out).eos_id) == (0, 0)
    renamed = path.rename(tmp_path / "tekken.data")  # no .json name: --format says what it is
    result = CliRunner().invoke(main, ["tokenizers", "import", str(renamed), "--format", "tekken", "--out", str(out)])
    assert result.exit_code == 0 and "imported tekken" in result.output, result.output
    assert load_tokenizer(out) == tok


def test_tekken_file_works_directly_in_prepare(tmp_path, tekken_vocab):
    path = tekken_file(tmp_path / "tekken.json", tekken_vocab, n_special=20, vocab_size=20 + len(tekken_vocab))
    enc = tiktoken.Encoding("tekken", pat_str=TEKKEN_PATTERN,
                            mergeable_ranks={t: r for r, t in enumerate(tekken_vocab)}, special_tokens={})
    _, _, texts = corpus_texts()
    ids, _ = prepared_ids(tmp_path, path)
    for doc_id, text in texts.items():
        assert ids[doc_id] == [1] + [i + 20 for i in enc.encode_ordinary(text)] + [2], doc_id


@pytest.mark.parametrize("change, fragment", [
    (lambda d: d["vocab"].__setitem__(3, {**d["vocab"][3], "rank": 4}), r"vocab\[3\]: rank 4 is out of order"),
    (lambda d: d["config"].__setitem__("default_vocab_size", 10 ** 6), "default_vocab_size 1000000 must lie between"),
    (lambda d: d["config"].__setitem__("default_num_special_tokens", 1.5), "default_num_special_tokens: id 1.5 is float"),
    (lambda d: d["vocab"].__setitem__(300, {**d["vocab"][300], "token_bytes": "!!"}), "is not valid base64"),
    (lambda d: d.__setitem__("special_tokens", [{"rank": 0, "token_str": "<s>"}, {"rank": 1, "token_str": "<s>"}]),
     "special token '<s>' appears twice"),
    (lambda d: d.__setitem__("special_tokens", [{"rank": 0, "token_str": "<unk>"}]), "bos token '<s>' is not a special"),
    (lambda d: d["config"].__setitem__("pattern", "(?<=a)b"), "config.pattern"),
    (lambda d: d["config"].update(default_num_special_tokens=10, default_vocab_size=10 + len(d["vocab"])),
     "the 20 implicit ones do not fit in config.default_num_special_tokens \\(10\\)"),
])
def test_bad_tekken_files_are_named(change, fragment, tekken_vocab, tmp_path):
    path = tekken_file(tmp_path / "tekken.json", tekken_vocab, n_special=20, vocab_size=20 + len(tekken_vocab))
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(TokenizerError, match=fragment):
        load_tokenizer(path)
    result = CliRunner().invoke(main, ["tokenizers", "import", str(path), "--out", str(tmp_path / "o.json")])
    assert result.exit_code == 2 and "tekken.json" in result.output


def test_family_pattern_names_are_their_regexes(tekken_vocab, tmp_path):
    """pattern="llama3" / "qwen2" / "tekken" stand for those families' regexes (the tokenizer holds the regex)."""
    from engine.tokenizers.pretokenize import REGEX_NAMES, canonical_pattern

    assert REGEX_NAMES["tekken"] == TEKKEN_PATTERN
    assert canonical_pattern("tekken") == TEKKEN_PATTERN and canonical_pattern("qwen2") == REGEX_NAMES["qwen2"]
    ranks = tmp_path / "r.tiktoken"
    ranks.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(tekken_vocab)))
    text = "I'M 12345 don'T  x\n\n ٣٤ αβγ"
    for name in ("llama3", "qwen2", "tekken"):
        tok = load_tiktoken(ranks, pattern=name)
        enc = tiktoken.Encoding(name, pat_str=REGEX_NAMES[name], special_tokens={},
                                mergeable_ranks={t: r for r, t in enumerate(tekken_vocab)})
        assert tok.pattern == REGEX_NAMES[name] and tok.encode(text).tolist() == enc.encode_ordinary(text)
    result = CliRunner().invoke(main, ["tokenizers", "import", str(ranks), "--pattern", "llama3", "--out",
                                       str(tmp_path / "l3.json")])
    assert result.exit_code == 0, result.output
    assert load_tokenizer(tmp_path / "l3.json").pattern == REGEX_NAMES["llama3"]


def test_a_word_class_regex_is_read_as_oniguruma_reads_it(tekken_vocab, tmp_path, shakespeare_text):
    """\\w and \\b mean Oniguruma's in a tokenizer.json: such a file loads as a pipeline (which compiles
    Oniguruma's), equal to Hugging Face on the code points where the two readings differ; a
    tokenizer trained with such a pattern is not exported as a tokenizer.json it would not equal."""
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    pattern = r"\w+|[^\w\s]+|\s+"
    ours = ByteBpeTrainer(vocab_size=400, pattern=pattern).train([shakespeare_text[:50_000]])
    with pytest.raises(TokenizerError, match=r"uses \\w, \\b, \^ or \$, which Hugging Face's Oniguruma reads otherwise"):
        save_hf_tokenizer_json(ours, tmp_path / "no.json")
    plain = ByteBpeTrainer(vocab_size=400, pattern="cl100k").train([shakespeare_text[:50_000]])
    data = json.loads(save_hf_tokenizer_json(plain, tmp_path / "t.json").read_text())
    data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = pattern
    (tmp_path / "t.json").write_text(json.dumps(data))
    tok = load_tokenizer(tmp_path / "t.json")
    assert tok.kind == "hf-bpe"
    hf = HfTokenizer.from_file(str(tmp_path / "t.json"))
    text = "a\u200db x²y ¼½ word\u200cjoin !² (½) hello!² world " + shakespeare_text[:2000]
    assert tok.encode(text).tolist() == hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("pattern", [r"[ ]+$|[ ]|\S+|\n", r"^[ ]+|[ ]|\S+|\n", r"\s+$|\s+|\S+"])
def test_anchors_mean_the_text_in_a_tiktoken_regex(pattern, tmp_path):
    """^ and $ are the text's start and end for tiktoken (Rust's regex crate), a line's for Oniguruma:
    a tiktoken file's regex reads them as tiktoken does, a tokenizer.json's as Hugging Face does."""
    ranks = {bytes([b]): b for b in range(256)} | {b"  ": 256, b" \n": 257}
    path = tmp_path / "r.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    tok = load_tiktoken(path, pattern=pattern)
    enc = tiktoken.Encoding("anchors", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    texts = ["a  \nb", "a\n  b", "  a  ", "x\n", "x  \n", "\n  \n  "]
    assert [tok.encode(t).tolist() for t in texts] == [enc.encode_ordinary(t) for t in texts]
    with pytest.raises(TokenizerError, match="Oniguruma reads otherwise"):
        save_hf_tokenizer_json(tok, tmp_path / "no.json")
