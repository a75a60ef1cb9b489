"""engine.tokenizers.base: what every tokenizer kind shares — id and text checks at encode and decode,
constructor checks, NUL round trips, tokenizer files (truncated, edited, foreign) and huge documents."""

import json
import random
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from engine.errors import TokenizerError
from engine.store import TokenStore
from engine.tokenizers import base
from engine.tokenizers.loading import load_tokenizer
from engine.tokenizers.bpe import BpeTokenizer, BpeTrainer
from engine.tokenizers.byte_bpe import ByteBpeTokenizer
from engine.tokenizers.char import CharTokenizer
from engine.tokenizers.word import WordTokenizer
from tests.helpers import SETTINGS


TRAIN = "the cat sat on the mat.\nthe dog sat on the log!\x00"


@pytest.fixture(scope="module")
def tokenizers():
    return {
        "char": CharTokenizer.fit(TRAIN),
        "word": WordTokenizer.fit(TRAIN),
        "bpe": BpeTrainer(20).train(TRAIN),
    }


KINDS = ["char", "word", "bpe"]


# -- tokenizers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_decode_id_at_or_above_vocab_size_names_id_and_position(tokenizers, kind):
    tok = tokenizers[kind]
    v = tok.vocab_size
    with pytest.raises(TokenizerError) as err:
        tok.decode([2, 3, v])
    assert str(err.value) == f"{kind} decode: id {v} at position 2 is outside the vocabulary (expected 0..{v - 1})"
    with pytest.raises(TokenizerError, match=f"{kind} decode: id -1 at position 0 is outside the vocabulary"):
        tok.decode(np.array([-1, 2], np.int64))


@pytest.mark.parametrize("kind", KINDS)
def test_decode_huge_ids_are_reported_as_themselves_not_wrapped(tokenizers, kind):
    tok = tokenizers[kind]
    with pytest.raises(TokenizerError, match=f"id {2**63 + 5} at position 1 is outside"):
        tok.decode(np.array([2, 2**63 + 5], np.uint64))
    with pytest.raises(TokenizerError, match=f"id {2**64} at position 0 is outside"):
        tok.decode([2**64])
    with pytest.raises(TokenizerError, match="expected integer ids, got dtype float64"):
        tok.decode([2.0])
    with pytest.raises(TokenizerError, match=r"expected a 1-d sequence of ids, got shape \(1, 1\)"):
        tok.decode([[2]])
    assert tok.decode([]) == ""


@pytest.mark.parametrize("kind", KINDS)
def test_non_str_text_is_a_tokenizer_error(tokenizers, kind):
    tok = tokenizers[kind]
    with pytest.raises(TokenizerError) as err:
        tok.encode(b"the cat")
    assert str(err.value) == f"{kind} encode: text is bytes, expected str (decode bytes as UTF-8 first)"
    with pytest.raises(TokenizerError, match=f"{kind} encode: text of document 'd7' is int, expected str"):
        tok.encode_document(7, "d7")
    with pytest.raises(TokenizerError, match=f"{kind} encode: text is NoneType, expected str"):
        tok.tokenize(None)
    with pytest.raises(TokenizerError, match=f"{kind} encode_documents: document 'b' is NoneType, expected str"):
        tok.encode_documents(["the", None], ["a", "b"])
    with pytest.raises(TokenizerError, match=f"{kind} encode_documents: texts is str, expected a list"):
        tok.encode_documents("the cat")
    with pytest.raises(TokenizerError, match=f"{kind} encode_documents: 1 document ids for 2 texts"):
        tok.encode_documents(["the", "cat"], ["a"])


@pytest.mark.parametrize("fit", [CharTokenizer.fit, WordTokenizer.fit, BpeTrainer(3).train])
def test_fitting_on_non_text_is_a_tokenizer_error(fit):
    with pytest.raises(TokenizerError, match="training text 1: expected a str, got bytes"):
        fit(["ok", b"bytes"])
    with pytest.raises(TokenizerError, match="training texts: expected a str or an iterable of str, got NoneType"):
        fit(None)


def test_lone_surrogates_never_enter_a_tokenizer():
    with pytest.raises(TokenizerError, match=r"holds a lone surrogate U\+D800 at character offset 1"):
        CharTokenizer.fit("a\ud800")
    with pytest.raises(TokenizerError, match=r"lone surrogate U\+DC00"):
        WordTokenizer.fit("x \udc00")
    with pytest.raises(TokenizerError, match=r"lone surrogate U\+D800"):
        BpeTrainer(2).train("a\ud800b")


def test_constructors_reject_malformed_arguments():
    with pytest.raises(TokenizerError, match="char tokenizer: alphabet is int, expected a str"):
        CharTokenizer(5)
    with pytest.raises(TokenizerError, match="word tokenizer: pieces must be a list of str, got str"):
        WordTokenizer("ab")
    with pytest.raises(TokenizerError, match=r"bpe tokenizer: merge 0 is \('a',\), expected a pair of non-empty strings"):
        BpeTokenizer("ab", [("a",)])
    with pytest.raises(TokenizerError, match=r"bpe tokenizer: history entry 0 is \(-1, 3\), expected a pair of integers >= 0"):
        BpeTokenizer("ab", [("a", "b")], [(-1, 3)])


@pytest.mark.parametrize("kind", KINDS)
def test_nul_characters_round_trip_through_every_tokenizer(tokenizers, kind, tmp_path):
    tok = tokenizers[kind]
    text = "the\x00cat sat\x00\x00 on the log!\x00"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    values, offsets = tok.encode_documents([text, "\x00"], ["a", "b"])
    assert tok.decode(values[offsets[1] : offsets[2]]) == "\x00"
    reloaded = load_tokenizer(tok.save(tmp_path / "tok.json"))
    assert reloaded == tok and reloaded.decode(reloaded.encode(text)) == text


def test_nul_round_trips_through_the_byte_level_tokenizer():
    from engine.tokenizers.byte_bpe import ByteBpeTrainer

    tok = ByteBpeTrainer(merges=10).train(TRAIN)
    assert tok.decode(tok.encode("a\x00b\x00")) == "a\x00b\x00"


# -- enormous documents ---------------------------------------------------------------------------


def test_twenty_megabyte_document_through_char_and_bpe_and_the_store(tmp_path, shakespeare_text):
    text = shakespeare_text * (20_000_000 // len(shakespeare_text) + 1)
    assert len(text) >= 20_000_000
    char = CharTokenizer.fit(shakespeare_text)
    bpe = BpeTrainer(50).train(shakespeare_text)
    encoded = {}
    for tok in (char, bpe):
        values, offsets = tok.encode_documents([text], ["big"])
        assert offsets.tolist() == [0, values.shape[0]] and values[0] == tok.bos_id and values[-1] == tok.eos_id
        encoded[tok.kind] = (values, offsets)
    assert encoded["char"][0].shape[0] == len(text) + 2
    head = bpe.decode(encoded["bpe"][0][1:2000])
    assert text.startswith(head) and len(head) > 2000
    with TokenStore.writer(tmp_path / "store", bpe) as writer:
        writer.write_chunk("train", ["big"], *encoded["bpe"])
    store = TokenStore.open(tmp_path / "store")
    store.verify()
    values, offsets = store.arrays("train")
    assert np.array_equal(values, encoded["bpe"][0])


# -- corrupt files -------------------------------------------------------------------------------


@pytest.fixture()
def saved_bpe(tmp_path):
    tok = BpeTrainer(20).train(TRAIN)
    return tok, tok.save(tmp_path / "bpe.json")


def test_truncated_tokenizer_file(saved_bpe):
    tok, path = saved_bpe
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(TokenizerError, match=r"bpe.json: tokenizer file is not valid JSON \(.*\); is it truncated\?"):
        load_tokenizer(path)


def test_flipped_character_in_tokenizer_payload(saved_bpe):
    tok, path = saved_bpe
    raw = path.read_text(encoding="utf-8")
    at = raw.index('"merges":[["') + len('"merges":[["')
    flipped = raw[:at] + ("q" if raw[at] != "q" else "z") + raw[at + 1 :]
    path.write_text(flipped, encoding="utf-8")
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(path)
    assert str(err.value).startswith(
        f"{path}: tokenizer file is corrupt: recorded hash '{tok.hash}' does not match its content (content hashes to "
    )


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"version": 2}, "tokenizer file format version 2 is newer than this engine supports (1); upgrade engine to read it"),
        ({"version": 0}, "tokenizer file format version 0 is not supported (expected 1)"),
        ({"version": True}, 'missing or non-integer "version" (expected 1)'),
        ({"kind": "sentencepiece"}, "unknown tokenizer kind 'sentencepiece' (expected one of: "),
        ({"format": "hf"}, 'not an engine tokenizer file (expected "format": "engine.tokenizer")'),
    ],
)
def test_tokenizer_file_header_problems(saved_bpe, change, fragment):
    tok, path = saved_bpe
    obj = json.loads(path.read_text())
    obj.update(change)
    path.write_text(json.dumps(obj))
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(path)
    assert str(err.value).startswith(f"{path}: {fragment}")


def test_foreign_json_files_are_not_tokenizers(tmp_path):
    (tmp_path / "list.json").write_text(json.dumps([1, 2]))
    with pytest.raises(TokenizerError, match='list.json: not an engine tokenizer file \\(expected "format": '
                                             '"engine.tokenizer"\\)'):
        load_tokenizer(tmp_path / "list.json")
    # A JSON object with a "model" is read as a Hugging Face tokenizer.json, and checked as one.
    (tmp_path / "hf.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {}, "merges": []}}))
    with pytest.raises(TokenizerError, match='hf.json: the model\'s "vocab" is empty'):
        load_tokenizer(tmp_path / "hf.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TokenizerError, match="deep.json: tokenizer file is JSON past engine.s limits: nested more"):
        load_tokenizer(tmp_path / "deep.json")


def test_tokenizer_payload_with_matching_hash_but_bad_content(tmp_path):
    import hashlib

    from engine.tokenizers.base import canonical_json

    def write(kind, payload, raw_payload=None):
        digest = (hashlib.sha256(canonical_json({"kind": kind, "payload": payload})).hexdigest()
                  if raw_payload is None else "0" * 64)
        text = json.dumps({"format": "engine.tokenizer", "version": 1, "kind": kind, "hash": digest, "payload": payload})
        if raw_payload is not None:
            text = text.replace('"PAYLOAD"', raw_payload)
        (tmp_path / "t.json").write_text(text)
        return tmp_path / "t.json"

    with pytest.raises(TokenizerError, match=r"t.json: tokenizer file is JSON past engine's limits: Infinity"):
        load_tokenizer(write("bpe", {"alphabet": "ab", "merges": [["a", "b"]], "history": [[1e400, 1]]}))
    with pytest.raises(TokenizerError, match=r"t.json: malformed char tokenizer payload \(KeyError: 'alphabet'\)"):
        load_tokenizer(write("char", {}))
    with pytest.raises(TokenizerError, match=r"t.json: malformed char tokenizer payload: char tokenizer: alphabet "
                                             r"must be distinct"):
        load_tokenizer(write("char", {"alphabet": "ba"}))
    with pytest.raises(TokenizerError, match=r"t.json: tokenizer file holds a lone surrogate \(U\+D800\) in its payload"):
        load_tokenizer(write("char", "PAYLOAD", raw_payload='{"alphabet": "\\ud800"}'))


# -- tokenizers ---------------------------------------------------------------------------------


FIT = {
    "char": CharTokenizer.fit,
    "word": WordTokenizer.fit,
    "bpe": lambda text: BpeTrainer(15).train(text),
}


@SETTINGS
@given(kind=st.sampled_from(sorted(FIT)), train=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60),
       data=st.data())
def test_tokenizers_round_trip_text_within_their_alphabet_and_their_file(tmp_path, kind, train, data):
    tok = FIT[kind](train)
    if kind == "word":  # a run of whole training pieces: joining other pieces could fuse unseen words
        pieces = tok.tokenize(train)
        start = data.draw(st.integers(0, len(pieces)))
        text = "".join(pieces[start : data.draw(st.integers(start, len(pieces)))])
    else:
        text = data.draw(st.text(st.sampled_from(sorted(set(train))), max_size=40))
    assert tok.decode(tok.encode(text)) == text
    values, offsets = tok.encode_documents([text, train], ["a", "b"])
    assert tok.decode(values[offsets[0] : offsets[1]]) == text and tok.decode(values[offsets[1] : offsets[2]]) == train
    loaded = load_tokenizer(tok.save(tmp_path / f"{kind}.json"))
    assert loaded == tok and loaded.vocab_size == tok.vocab_size
    assert np.array_equal(loaded.encode(train), tok.encode(train)) and loaded.decode(tok.encode(text)) == text


@pytest.fixture(scope="module")
def saved_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    text = "the cat sat on the mat.\x00 ünï ✓"
    toks = [CharTokenizer.fit(text), WordTokenizer.fit(text, unknown="<unk>"), BpeTrainer(12).train(text)]
    return [(tok, tok.save(root / f"{tok.kind}.json").read_bytes()) for tok in toks]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 2), seed=st.integers(0, 2**32 - 1), edits=st.integers(1, 4))
def test_mutated_tokenizer_file_loads_identically_or_raises_tokenizer_error(tmp_path, saved_files, which, seed, edits):
    tok, raw = saved_files[which]
    rng = random.Random(seed)
    data = bytearray(raw)
    for _ in range(edits):
        op, at = rng.randrange(4), rng.randrange(len(data) + 1)
        if op == 0 and at < len(data):
            data[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            del data[at : at + rng.randint(1, 8)]
        elif op == 2:
            data[at:at] = rng.choice([b" ", b"\x00", b'"', b"\\ud800", b"[", b"9" * 30, b"\xff"])
        else:
            data = data[:at]
    path = tmp_path / "mutated.json"
    path.write_bytes(bytes(data))
    try:
        loaded = load_tokenizer(path)
    except TokenizerError:
        return
    assert loaded == tok and loaded.decode(loaded.encode("the cat")) == "the cat"


def test_bound_is_documented_constant():
    assert base.MAX_VOCAB_SIZE == 1 << 24


def resave_with_specials(tmp_path, specials: dict) -> str:
    """An engine tokenizer file whose specials were edited, with its hash recomputed (a valid file)."""
    import hashlib

    from engine.tokenizers.base import canonical_json

    tok = ByteBpeTokenizer([bytes([b]) for b in range(256)], specials={"<e>": 256}, bos="<e>", eos="<e>")
    obj = tok.to_json()
    obj["payload"]["specials"] = specials
    obj["hash"] = hashlib.sha256(canonical_json({"kind": obj["kind"], "payload": obj["payload"]})).hexdigest()
    path = tmp_path / "engine.json"
    path.write_text(json.dumps(obj))
    return str(path)


@pytest.mark.parametrize("value", [1_500_000_000, 2**32, -1])
def test_engine_file_special_ids_are_checked_quickly(tmp_path, value):
    path = resave_with_specials(tmp_path, {"<e>": value})
    started = time.monotonic()
    with pytest.raises(TokenizerError, match=f"special token '<e>': id {value} is outside 0..16777215"):
        load_tokenizer(path)
    assert time.monotonic() - started < 5


def test_engine_file_duplicate_special_ids_are_refused(tmp_path):
    path = resave_with_specials(tmp_path, {"<e>": 256, "<f>": 256})
    with pytest.raises(TokenizerError, match="special tokens '<e>' and '<f>' share id 256"):
        load_tokenizer(path)


def test_saving_twice_writes_the_same_file_as_a_fresh_tokenizer(tmp_path):
    """The file text is made once per tokenizer (prepare saves it twice): a second save, and a save
    of the reloaded tokenizer, write the same bytes, which are the tokenizer's to_json."""
    tok = ByteBpeTokenizer([bytes([b]) for b in range(256)] + [b"ab"], merges=[(97, 98)],
                           specials={"<bos>": 257, "<eos>": 258})
    first = tok.save(tmp_path / "a.json").read_bytes()
    second = tok.save(tmp_path / "b.json").read_bytes()
    assert first == second
    assert json.loads(first) == tok.to_json()
    assert load_tokenizer(tmp_path / "b.json").save(tmp_path / "c.json").read_bytes() == first


def test_a_saved_tokenizer_file_gets_the_mode_of_any_new_file(tmp_path):
    import os
    import stat

    from engine.tokenizers.char import CharTokenizer

    old = os.umask(0o022)
    try:
        path = CharTokenizer.fit("abc").save(tmp_path / "t.json")
        os.umask(0o077)
        private = CharTokenizer.fit("abc").save(tmp_path / "p.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "t.json"]  # no temporary file left
