"""SentencePiece BPE models: ids and decoding against the ``sentencepiece`` library, the kernels
against their plain-loop twin (tests/naive_sentencepiece.py), files, pickling, threads, refusals."""

from __future__ import annotations

import json
import pickle
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import TokenizerError
from engine.tokenizers import load_tokenizer
from engine.tokenizers.sentencepiece import SentencePieceTokenizer, load_sentencepiece
from engine.tokenizers.spm_model import looks_like_model, parse_model
from tests.conftest import ROOT, shakespeare_path
from tests.naive_sentencepiece import naive_encode, naive_normalize

spm = pytest.importorskip("sentencepiece", reason="needs the test extra (pip install -e '.[test]')")

# Options of each trained model (all BPE, vocabulary 600 unless given, on Tiny Shakespeare).
MODELS = {
    "identity_bytes": dict(normalization_rule_name="identity", byte_fallback=True),
    "nfkc": dict(normalization_rule_name="nmt_nfkc", byte_fallback=False),
    "nfkc_user": dict(normalization_rule_name="nmt_nfkc", byte_fallback=True, split_digits=True,
                      user_defined_symbols=["<sep>", "ab", "\u2581the\u2581", "42"]),
    "whitespace": dict(normalization_rule_name="identity", byte_fallback=True, allow_whitespace_only_pieces=True,
                       remove_extra_whitespaces=False, add_dummy_prefix=False, split_digits=True),
    "suffix": dict(normalization_rule_name="nmt_nfkc", treat_whitespace_as_suffix=True, byte_fallback=True),
    "nfkc_cf_plain": dict(normalization_rule_name="nfkc_cf", add_dummy_prefix=False, byte_fallback=False),
    # Llama 2 / Mistral's options: identity, byte fallback, digits apart, whitespace-only pieces, spaces kept
    "llama_like": dict(normalization_rule_name="identity", byte_fallback=True, split_digits=True,
                       allow_whitespace_only_pieces=True, remove_extra_whitespaces=False, vocab_size=1000),
    "no_split": dict(normalization_rule_name="identity", split_by_whitespace=False, byte_fallback=True, vocab_size=900),
}

FRAGMENTS = [" ", "  ", "   ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u2581", "\u2581\u2581", "the", "The", " the ",
             "thee", "and", "KING", "ab", "abab", "<sep>", "42", "12345", "0", "é", "e\u0301", "\u0301", "ﬁ", "①",
             "Ａ", "日本語", "中", "😀", "👍🏽", "\u200b", "\x00", "\x7f", "’", "...", "!?", "Ω", "ß", "İ", "ǅ", "ῼ",
             "\ufeff", "\U0010fffd", "x", "q", "z"]


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """{name: path of the trained .model}."""
    folder = tmp_path_factory.mktemp("spm")
    out = {}
    for name, options in MODELS.items():
        options = {"vocab_size": 600, **options}
        spm.SentencePieceTrainer.train(input=str(shakespeare_path()), model_prefix=str(folder / name), model_type="bpe",
                                       minloglevel=2, **options)
        out[name] = folder / f"{name}.model"
    return out


@pytest.fixture(scope="session")
def pairs(models):
    """{name: (engine tokenizer, SentencePieceProcessor)}."""
    return {name: (load_tokenizer(path), spm.SentencePieceProcessor(model_file=str(path)))
            for name, path in models.items()}


def fragments_text():
    return st.lists(st.sampled_from(FRAGMENTS), max_size=24).map("".join)


def any_text():
    return st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


TEXTS = st.one_of(fragments_text(), any_text(), st.tuples(fragments_text(), any_text()).map("".join))


@pytest.mark.parametrize("name", list(MODELS))
def test_ids_equal_sentencepiece_on_adversarial_text(pairs, name):
    tok, sp = pairs[name]

    @settings(max_examples=250, deadline=None)
    @given(TEXTS)
    def check(text):
        ids = sp.encode(text)
        assert tok.encode(text).tolist() == ids
        assert tok.decode(ids) == sp.decode(ids)

    check()


@pytest.mark.parametrize("name", list(MODELS))
def test_ids_equal_sentencepiece_on_real_text(pairs, name, shakespeare_text):
    tok, sp = pairs[name]
    lines = shakespeare_text.splitlines()
    assert tok.encode_batch(lines) and [a.tolist() for a in tok.encode_batch(lines)] == sp.encode(lines)
    whole = shakespeare_text[:200_000]
    assert tok.encode(whole).tolist() == sp.encode(whole)
    corpus = [json.loads(line)["text"] for line in (ROOT / "data" / "corpus.jsonl").read_text().splitlines() if line]
    assert [tok.encode(t).tolist() for t in corpus] == sp.encode(corpus)
    for text in corpus:
        ids = sp.encode(text)
        assert tok.decode(ids) == sp.decode(ids)


@pytest.mark.parametrize("name", ["identity_bytes", "nfkc", "whitespace", "suffix"])
def test_decode_of_any_ids_equals_sentencepiece(pairs, name):
    """Random id sequences: byte pieces forming invalid UTF-8, control pieces, <unk>, leading ▁ pieces."""
    tok, sp = pairs[name]
    rng = random.Random(7)
    n = tok.vocab_size
    for _ in range(400):
        ids = [rng.randrange(n) if rng.random() < 0.6 else rng.randrange(min(n, 300)) for _ in range(rng.randrange(12))]
        assert tok.decode(ids) == sp.decode(ids), ids


def test_round_trip_is_the_normalized_text(pairs):
    tok, sp = pairs["identity_bytes"]
    for text in ["Hello  world\t😀 日本", "  lead and trail  ", "a\n\nb"]:
        normalized = tok.normalize(text).replace("\u2581", " ").lstrip(" ")
        assert tok.decode(tok.encode(text)) == normalized == sp.decode(sp.encode(text))


@pytest.mark.parametrize("name", list(MODELS))
def test_kernels_equal_the_plain_loop_twin(pairs, models, name):
    tok, _ = pairs[name]
    model = parse_model(models[name].read_bytes())

    @settings(max_examples=150, deadline=None)
    @given(TEXTS)
    def check(text):
        assert tok.normalize(text) == naive_normalize(model, text)
        assert tok.encode(text).tolist() == naive_encode(model, text)

    check()


def test_many_documents_in_one_call_equal_one_by_one(pairs):
    rng = random.Random(3)
    for name in ("nfkc", "whitespace", "nfkc_user"):
        tok, sp = pairs[name]
        texts = ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(30))) for _ in range(300)]
        values, offsets = tok.encode_documents(texts)
        bounds = offsets.tolist()
        for i, text in enumerate(texts):
            assert values[bounds[i]:bounds[i + 1]].tolist() == [tok.bos_id, *sp.encode(text), tok.eos_id]
        threaded = [a.tolist() for a in tok.encode_batch(texts * 40, threads=2)]
        assert threaded == sp.encode(texts * 40)


def test_unknown_runs_are_one_unk_without_byte_fallback(pairs):
    tok, sp = pairs["nfkc"]
    # a long run is one unknown, beside ASCII and spaces too
    for text in ["😀😀😀", "a 😀😀 b", "日本語 日本語", "😀 😀", "😀" * 100, "a" + "日本語" * 40 + " b " + "😀" * 33]:
        ids = tok.encode(text).tolist()
        assert ids == sp.encode(text)
        assert tok.unk_id in ids
    assert tok.encode("😀😀😀").tolist().count(tok.unk_id) == 1
    assert tok.encode("😀" * 100).tolist().count(tok.unk_id) == 1


def test_a_full_cache_of_chunks_starts_afresh_with_the_same_ids(models, shakespeare_text):
    """A cache that fills (here one of 64 slots and a few hundred bytes and ids) is emptied and
    refilled many times over a text; the ids stay the library's."""
    from engine.kernels.bpe_encode import new_piece_cache

    for name in ("nfkc_user", "llama_like"):
        tok = load_sentencepiece(models[name])
        sp = spm.SentencePieceProcessor(model_file=str(models[name]))
        tok._caches = [new_piece_cache(64, 300, 200)]
        text = shakespeare_text[:60_000]
        assert tok.encode(text).tolist() == sp.encode(text)
        table, _, _, state = tok._caches[0]
        assert 0 < state[0] <= 48 and state[1] <= 300 and state[2] <= 200
        assert int((table[:, 0] != 0).sum()) == state[0]


def test_byte_fallback_gives_byte_pieces(pairs):
    tok, sp = pairs["identity_bytes"]
    ids = tok.encode("😀").tolist()
    assert ids == sp.encode("😀")
    assert [tok.pieces[i] for i in ids] == ["\u2581", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert tok.decode(ids) == "😀"


def test_chunks_are_cut_where_no_piece_joins_the_two_characters(pairs):
    """Merging chunk by chunk is exact because no piece holds a cut's pair: the models whose pieces
    cross words (split_by_whitespace=False) or hold "e▁" (a user-defined "▁the▁") keep those joins."""
    from engine.kernels.spm_bpe import chunk_end

    tok, sp = pairs["no_split"]
    joined = [p for p in tok.pieces if "\u2581" in p[1:] and tok.types[tok.pieces.index(p)] == 1]
    assert joined  # pieces across words
    for piece in joined[:50]:
        data = np.frombuffer(piece.encode(), dtype=np.uint8)
        assert chunk_end(data, 0, data.shape[0], tok._ascii_join, tok._join_table) == data.shape[0]
    tok, _ = pairs["identity_bytes"]
    data = np.frombuffer("\u2581the\u2581king".encode(), dtype=np.uint8)
    assert chunk_end(data, 0, data.shape[0], tok._ascii_join, tok._join_table) == len("\u2581the".encode())
    tok, _ = pairs["nfkc_user"]
    assert chunk_end(data, 0, data.shape[0], tok._ascii_join, tok._join_table) > len("\u2581the".encode())


def test_wrappers_and_file_round_trip(pairs, tmp_path):
    tok, sp = pairs["nfkc_user"]
    assert (tok.bos, tok.eos, tok.bos_id, tok.eos_id) == ("<s>", "</s>", sp.bos_id(), sp.eos_id())
    assert tok.encode_document("the king").tolist() == [sp.bos_id(), *sp.encode("the king"), sp.eos_id()]
    path = tok.save(tmp_path / "t.json")
    again = load_tokenizer(path)
    assert isinstance(again, SentencePieceTokenizer) and again.hash == tok.hash and again == tok
    text = "KING 42 <sep> the\u2581the abab é ① 😀"
    assert again.encode(text).tolist() == sp.encode(text)
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.encode(text).tolist() == sp.encode(text) and copy.hash == tok.hash


def test_named_wrappers(models):
    tok = load_sentencepiece(models["nfkc"], bos="</s>", eos="</s>")
    assert tok.bos_id == tok.eos_id == 2
    with pytest.raises(TokenizerError, match="bos piece '<bos>' is not a piece of the model"):
        load_sentencepiece(models["nfkc"], bos="<bos>")


def test_unigram_and_unsupported_models_are_refused_by_name(tmp_path, models):
    spm.SentencePieceTrainer.train(input=str(shakespeare_path()), model_prefix=str(tmp_path / "uni"), vocab_size=300,
                                   model_type="unigram", minloglevel=2)
    with pytest.raises(TokenizerError, match=r"uni\.model: SentencePiece model type UNIGRAM is not implemented"):
        load_tokenizer(tmp_path / "uni.model")
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(models["nfkc"].read_bytes())
    proto.pieces[10].type = pb.ModelProto.SentencePiece.UNUSED
    (tmp_path / "unused.model").write_bytes(proto.SerializeToString())
    with pytest.raises(TokenizerError, match=r"unused\.model: piece 10 .* has type UNUSED, which is not implemented"):
        load_tokenizer(tmp_path / "unused.model")
    proto.ParseFromString(models["nfkc"].read_bytes())
    proto.denormalizer_spec.precompiled_charsmap = proto.normalizer_spec.precompiled_charsmap
    (tmp_path / "denorm.model").write_bytes(proto.SerializeToString())
    with pytest.raises(TokenizerError, match=r"denorm\.model: a denormalizer .* is not implemented"):
        load_tokenizer(tmp_path / "denorm.model")


def test_a_broken_model_file_is_named(tmp_path, models):
    raw = models["nfkc"].read_bytes()
    assert looks_like_model(raw) and not looks_like_model(b'{"model": 1}') and not looks_like_model(b"IQ== 0\n")
    (tmp_path / "cut.model").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(TokenizerError, match=r"cut\.model: not a SentencePiece model: .* at byte \d+"):
        load_tokenizer(tmp_path / "cut.model")


def test_identity_model_keeps_tabs_and_newlines(pairs):
    tok, sp = pairs["identity_bytes"]
    assert tok.normalize(" a\tb\n c  ") == "\u2581a\tb\n\u2581c"
    tok2, _ = pairs["nfkc"]
    assert tok2.normalize(" a\tb\n c  ") == "\u2581a\u2581b\u2581c"
    assert tok2.normalize("ﬁ ①") == "\u2581fi\u25811"


def test_long_inputs(pairs):
    tok, sp = pairs["whitespace"]
    for text in ["a" * 20_000, " " * 20_000, "中" * 20_000, ("ab " * 7000)]:
        assert tok.encode(text).tolist() == sp.encode(text)
    assert np.array_equal(tok.encode("x" * 5000), tok.encode("x" * 5000))


def test_cli_import_and_prepare_through_store_and_windows(models, tmp_path):
    from click.testing import CliRunner

    from engine.cli import main
    from engine.corpus import Partition
    from engine.store import TokenStore
    from engine.windows import CausalWindowConfig

    model = models["nfkc_user"]
    sp = spm.SentencePieceProcessor(model_file=str(model))
    runner = CliRunner()
    result = runner.invoke(main, ["tokenizers", "import", str(model), "--out", str(tmp_path / "imported.json")])
    assert result.exit_code == 0, result.output
    assert "imported sentencepiece" in result.output and "spm-bpe" in result.output and "bos '<s>'=1" in result.output
    imported = load_tokenizer(tmp_path / "imported.json")
    assert imported == load_tokenizer(model)

    corpus = tmp_path / "corpus.txt"
    text = "First Citizen:\nBefore we proceed any further, hear me speak.  \u00e9\u0301 \u2460 42 <sep> \U0001f600\n" * 20
    corpus.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    result = runner.invoke(main, ["prepare", str(corpus), "--tokenizer", str(model), "--train-fraction", "1",
                                  "--context", "16", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    tok = load_tokenizer(out / "tokenizer.json")
    assert tok.hash == imported.hash == report["tokenizer"]["hash"]
    store = TokenStore.open(out / "store", tokenizer=tok)
    values, offsets = store.arrays(Partition("train"))
    expected = [sp.bos_id(), *sp.encode(text), sp.eos_id()]
    assert values.tolist() == expected and offsets.tolist() == [0, len(expected)]
    config = CausalWindowConfig(16, 1)
    assert report["partitions"]["train"]["windows"] == config.window_count(len(expected)) == len(expected) - 16
    first = config.windows(values)[0]
    assert first.input.tolist() == expected[:16] and first.target.tolist() == expected[1:17]

    bad = tmp_path / "junk.model"
    bad.write_bytes(b"\x0a\x05\x0a\x03abc\xff\xff")
    result = runner.invoke(main, ["prepare", str(corpus), "--tokenizer", str(bad), "--out", str(tmp_path / "o2")])
    assert result.exit_code == 2 and "junk.model: not a SentencePiece model" in result.output


def test_replacements_longer_than_their_keys(pairs):
    """nmt_nfkc writes U+337F as four CJK characters and U+FDFA as eighteen letters: the normalized
    text outgrows three bytes a byte, and the normalizer's retry with more room gives the library's ids."""
    tok, sp = pairs["nfkc"]
    for text in ["\u337f" * 2000, "\ufdfa" * 500]:
        assert len(tok.normalize(text).encode()) > 3 * len(text.encode())
        assert tok.encode(text).tolist() == sp.encode(text)
    mixed = "a\ufdfa b\u337f " * 300
    assert tok.encode(mixed).tolist() == sp.encode(mixed)
