"""Long documents are encoded span by span (engine.tokenizers.streaming) with the ids of the whole
document: random texts over an alphabet full of the patterns' edge cases, spans forced tiny."""

import random

import numpy as np
import pytest

import engine.tokenizers.streaming as streaming
from engine.errors import TokenizerError
from engine.tokenizers.base import UnknownInputError
from engine.tokenizers.bpe import BpeTrainer
from engine.tokenizers.byte_bpe import ByteBpeTrainer
from engine.tokenizers.char import CharTokenizer
from engine.tokenizers.word import WordTokenizer

# Letters of every case class, marks, numbers, punctuation the patterns treat specially (' / and
# contractions), every kind of whitespace, CR/LF, and characters of 2, 3 and 4 UTF-8 bytes.
ATOMS = (list("aAbZxyz") + ["é", "ß", "Ǆ", "ʰ", "中", "文", "\u0301", "\u0903", "5", "٣", "Ⅻ", "'", "'s", "'re",
                              "'LL", "/", ".", "!", "?", "—", "😀", " ", "  ", "\t", "\u00a0", "\u3000", "\r", "\n",
                              "\r\n", " \n ", "don't", "I'm", "HTTP/2", "x86", "e.g.", "...", "ab12cd", "  \n\n  "])


def random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ATOMS) for _ in range(n))


@pytest.fixture(scope="module")
def training_text():
    rng = random.Random(7)
    return [random_text(rng, 400) for _ in range(8)]


def encode_both(tok, texts, ids, chars):
    whole = tok.encode_documents(texts, ids, stream_chars=1 << 40)
    return whole, tok.encode_documents(texts, ids, stream_chars=chars)


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
def test_byte_bpe_spans_give_the_ids_of_the_whole_document(pattern, training_text):
    tok = ByteBpeTrainer(120, pattern=pattern).train(training_text)
    rng = random.Random(11)
    for trial in range(40):
        texts = [random_text(rng, rng.randint(0, 120)) for _ in range(rng.randint(1, 4))]
        ids = [f"d{i}" for i in range(len(texts))]
        (values, offsets), (spanned, spanned_offsets) = encode_both(tok, texts, ids, rng.randint(1, 64))
        assert np.array_equal(spanned, values) and np.array_equal(spanned_offsets, offsets), (pattern, trial, texts)
        assert spanned.dtype == np.uint32 and spanned_offsets.dtype == np.int64


@pytest.mark.parametrize("make", ["bpe", "word", "char"])
def test_word_split_kinds_and_char_spans_give_the_ids_of_the_whole_document(make, training_text):
    tok = {"bpe": lambda: BpeTrainer(150).train(training_text),
           "word": lambda: WordTokenizer.fit(training_text, unknown="<unk>"),
           "char": lambda: CharTokenizer.fit(training_text + ATOMS)}[make]()
    rng = random.Random(13)
    for trial in range(40):
        texts = [random_text(rng, rng.randint(0, 120)) for _ in range(rng.randint(1, 4))]
        (values, offsets), (spanned, spanned_offsets) = encode_both(tok, texts, None, rng.randint(1, 64))
        assert np.array_equal(spanned, values) and np.array_equal(spanned_offsets, offsets), (make, trial, texts)


def test_word_unknown_count_covers_every_span():
    tok = WordTokenizer.fit("a b", unknown="<unk>")
    text = "a zz b zz " * 30
    whole, spanned = encode_both(tok, [text, "zz"], None, 7)
    assert np.array_equal(whole[0], spanned[0])
    assert tok.last_unknown_count == 61


def test_errors_in_a_later_span_name_the_offset_in_the_document():
    text = "ab ab ab ab ab ab ab ab ab ab ab Q ab"
    for tok in (CharTokenizer(" ab"), BpeTrainer(3).train("ab ab")):
        with pytest.raises(UnknownInputError, match=r"character 'Q' \(U\+0051\) at offset 33 of document 'long'"):
            tok.encode_documents(["ab", text], ["short", "long"], stream_chars=8)
    byte_level = ByteBpeTrainer(5).train("ab ab")
    with pytest.raises(TokenizerError, match=r"document 'long', character offset 33: lone surrogate U\+D800"):
        byte_level.encode_documents([text.replace("Q", "\ud800")], ["long"], stream_chars=8)


def test_progress_reports_the_bytes_of_each_span(training_text):
    tok = ByteBpeTrainer(50).train(training_text)
    text = "word é " * 100
    seen = []
    tok.encode_documents(["short", text], progress=seen.append, stream_chars=50)
    assert len(seen) > 5 and sum(seen) == len(text.encode("utf-8"))


def test_safe_piece_end_never_cuts_inside_a_run_that_may_continue():
    data = np.frombuffer("ab cd".encode(), dtype=np.uint8)
    ends = np.array([2, 5], dtype=np.int64)
    assert streaming.safe_piece_end(data, ends, 4) == 2  # letter, then a space: safe
    spaces = np.frombuffer("a \n\n b".encode(), dtype=np.uint8)
    assert streaming.safe_piece_end(spaces, np.array([1, 2, 4, 6], dtype=np.int64), 5) == 1  # never after whitespace
    punct = np.frombuffer("a!\n\nb".encode(), dtype=np.uint8)
    assert streaming.safe_piece_end(punct, np.array([1, 4, 5], dtype=np.int64), 5) == 1  # not punctuation then \n
    mark = np.frombuffer("e\u0301 x".encode(), dtype=np.uint8)
    assert streaming.safe_piece_end(mark, np.array([1, 3, 5], dtype=np.int64), 4) == 0  # marks join runs


@pytest.mark.parametrize("kind", ["char", "word", "bpe", "byte-bpe-gpt2", "byte-bpe-cl100k", "byte-bpe-o200k"])
def test_long_training_texts_are_counted_span_by_span_with_the_same_types(kind):
    from engine.tokenizers.type_table import count_types
    from engine.tokenizers.base import FitOptions, trainer_for

    name, _, pattern = kind.partition("-bpe-")
    name = "byte-bpe" if pattern else name
    trainer = trainer_for(name, FitOptions(merges=40, pattern=pattern or None, unknown="<unk>"))
    rng = random.Random(17)
    batches = [[random_text(rng, rng.randint(0, 150)) for _ in range(3)] for _ in range(4)]
    whole = count_types(trainer, batches, 1)
    # windows of 40 characters always hold a safe place in this text (its pieces are at most 13 long), so
    # no piece is cut in parts (see the next test for those)
    spanned = list(streaming.training_batches(trainer, batches, stream_chars=40))
    assert max(len(t) for b in spanned for t in b) < 150 and len(spanned) > 12
    table = count_types(trainer, spanned, 2)
    # The same types with the same counts (in first-appearance order, but for char's sorted batches).
    assert dict(zip(table.types(), table.counts().tolist())) == dict(zip(whole.types(), whole.counts().tolist()))
    if name != "char":
        assert table.types() == whole.types()
    assert trainer.train_from_counts(table.types(), table.counts()).hash == \
        trainer.train_from_counts(whole.types(), whole.counts()).hash


@pytest.mark.parametrize("tokenizer", ["byte-bpe", "bpe"])
def test_prepare_on_long_documents_writes_the_same_store_span_by_span(tokenizer, tmp_path):
    import json

    from engine.pipeline import PrepareLimits, prepare

    rng = random.Random(23)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": random_text(rng, rng.randint(50, 400))}) + "\n"
                              for i in range(12)), encoding="utf-8")
    options = dict(tokenizer=tokenizer, merges=60, context_length=8, threads=2, quiet=True,
                   hash_split={"train": 0.8, "validation": 0.1, "test": 0.1})
    whole = prepare(corpus, None, tmp_path / "whole", **options)
    spanned = prepare(corpus, None, tmp_path / "spanned", **options, limits=PrepareLimits(stream_chars=41))
    assert spanned.report["tokenizer"]["hash"] == whole.report["tokenizer"]["hash"]
    assert spanned.report["partitions"] == whole.report["partitions"]
    manifest = lambda r: json.loads((r.store_path / "_engine.json").read_text())  # noqa: E731
    assert manifest(spanned) == manifest(whole)


@pytest.mark.parametrize("level", ["char", "byte"])
def test_a_piece_with_no_break_is_counted_in_parts_for_fitting(level):
    """"ab" * N is one piece: fitting counts it as parts of stream_chars characters (bounded memory), the
    same in train(texts) and in prepare's batches; encoding still takes it whole."""
    from engine.tokenizers.bpe import BpeTrainer
    from engine.tokenizers.limits import TrainLimits
    from engine.tokenizers.streaming import fit_texts, training_batches

    text = "ab" * 100 + "b"  # 201 characters, no safe place anywhere: parts of 50, 50, 50, 50 and 1
    parts = ["ab" * 25] * 4 + ["b"]
    trainer = BpeTrainer(8, level=level, limits=TrainLimits(stream_chars=50))
    assert list(fit_texts(trainer, [text], stream_chars=50)) == parts
    assert [b for b in training_batches(trainer, [["short text", text]], stream_chars=50)] == [["short text"]] + [
        [p] for p in parts]
    types, counts = trainer.count_types(list(fit_texts(trainer, [text], stream_chars=50)))
    key = "ab" * 25 if level == "char" else ("ab" * 25).encode()
    assert dict(zip(types, counts.tolist()))[key] == 4
    tok = trainer.train(text)
    assert tok.hash == trainer.train(parts).hash  # train(texts) counted the parts
    assert tok.decode(tok.encode(text)) == text
    values, offsets = tok.encode_documents([text], stream_chars=50)  # one piece longer than a span: whole
    assert values.tolist() == [tok.bos_id] + tok.encode(text).tolist() + [tok.eos_id]


class _Parts:
    """A text read part by part (the ``parts()`` of a long line left in its file)."""

    def __init__(self, text: str, size: int):
        self.text, self.size = text, size

    def parts(self):
        return (self.text[i:i + self.size] for i in range(0, len(self.text), self.size))


@pytest.mark.parametrize("kind", ["byte-bpe-gpt2", "byte-bpe-cl100k", "byte-bpe-o200k", "bpe", "word"])
def test_a_stretch_longer_than_piece_chars_is_cut_every_piece_chars_whatever_stream_chars(kind, training_text):
    # "x!" ends where the stretch " abab...ab" (1,001 characters, one piece: no safe place in it) begins,
    # and "!" ends it: spans [0, 2), then the stretch cut every 301 characters from its start (inside an
    # "ab": ids the whole piece would not have), then the rest
    name, _, pattern = kind.partition("-bpe-")
    tok = (ByteBpeTrainer(120, pattern=pattern).train(training_text) if pattern else
           BpeTrainer(150).train(training_text) if name == "bpe" else
           WordTokenizer.fit(training_text + ["ab" * 500], unknown="<unk>"))
    text = "x! " + "ab" * 500 + "! y"
    # the stretch starts after "x!" for byte-level patterns (" abab..." is one piece), after "x! " for the
    # word split (every non-word character is a safe place of its own)
    start = 2 if pattern else 3
    cuts = [0, start, start + 301, start + 602, start + 903, len(text)]
    expected = [tok.bos_id] + [i for a, b in zip(cuts, cuts[1:]) for i in tok.encode(text[a:b]).tolist()] + [tok.eos_id]
    assert expected != tok.encode_documents([text], stream_chars=1 << 40)[0].tolist()  # the cap changes these ids
    for stream_chars in (1, 7, 50, 150, 301):
        spans = [pos for pos, _ in streaming.iter_spans(text, lambda w, at, final: tok._span(w, at, None, final),
                                                        stream_chars=stream_chars, piece_chars=301)]
        inside = lambda positions: [p for p in positions if start < p <= 1003]  # noqa: E731 (the stretch's cuts)
        assert inside(spans) == cuts[2:-1] and start in spans, (kind, stream_chars, spans)
        parted = [pos for pos, _ in streaming.iter_spans(_Parts(text, 37), lambda w, at, final: tok._span(
            w, at, None, final), stream_chars=stream_chars, piece_chars=301)]
        assert inside(parted) == cuts[2:-1] and start in parted, (kind, stream_chars, parted)
        values, offsets = tok.encode_documents(["ab x", text], stream_chars=stream_chars, piece_chars=301)
        assert values[offsets[1]:].tolist() == expected, (kind, stream_chars)
    # below the cap the stretch is one span: the ids of the whole document
    assert tok.encode_documents([text], stream_chars=50, piece_chars=2000)[0].tolist() == \
        tok.encode_documents([text], stream_chars=1 << 40)[0].tolist()


def test_piece_chars_below_stream_chars_never_shortens_a_span(training_text):
    tok = ByteBpeTrainer(120).train(training_text)
    text = "ab" * 1000
    spans = [pos for pos, _ in streaming.iter_spans(text, lambda w, at, final: tok._span(w, at, None, final),
                                                    stream_chars=700, piece_chars=10)]
    assert spans == [0, 700, 1400]


def test_encode_and_encode_batch_stream_a_long_text_as_prepare_does(training_text):
    """encode, encode_document and encode_batch give encode_documents' ids for a text longer than
    STREAM_CHARS (span by span, cut at PIECE_CHARS), so no encode call holds a whole unbroken piece."""
    tok = ByteBpeTrainer(120).train(training_text)
    text = "x! " + "ab" * (streaming.PIECE_CHARS // 2 + 1000) + "! y"  # a stretch of PIECE_CHARS + 2,001 characters
    values, _ = tok.encode_documents([text])
    cut = 2 + streaming.PIECE_CHARS
    assert values[1:-1].tolist() == tok.encode(text[:2]).tolist() + tok.encode(text[2:cut]).tolist() + tok.encode(
        text[cut:]).tolist()
    assert np.array_equal(tok.encode(text), values[1:-1])
    assert np.array_equal(tok.encode_document(text), values)
    short = random_text(random.Random(5), 30)
    batch = tok.encode_batch([short, text, short], threads=2)
    assert [b.tolist() for b in batch] == [tok.encode(short).tolist(), values[1:-1].tolist(), tok.encode(short).tolist()]


def test_prepare_cuts_a_long_unbroken_piece_by_its_limits(tmp_path):
    import json

    from engine.pipeline import PrepareLimits, prepare
    from engine.store import TokenStore

    corpus = tmp_path / "c.jsonl"
    long_text = "x! " + "ab" * 500 + "! y"
    texts = {"long": long_text, **{f"d{i}": random_text(random.Random(i), 60) for i in range(6)}}
    corpus.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in texts.items()), encoding="utf-8")
    options = dict(tokenizer="byte-bpe", merges=60, context_length=8, threads=2, quiet=True,
                   hash_split={"train": 0.5, "validation": 0.25, "test": 0.25})
    run = prepare(corpus, None, tmp_path / "out", **options, limits=PrepareLimits(stream_chars=50, piece_chars=301))
    store = TokenStore.open(run.store_path)
    tok = store.tokenizer()
    part = next(p for p in store.partitions if "long" in store.ids(p))
    ids = store.tokens_array(part)[store.ids(part).index("long")].as_py()
    cuts = [0, 2, 303, 604, 905, len(long_text)]
    assert ids != [tok.bos_id] + tok.encode(long_text).tolist() + [tok.eos_id]  # the cuts changed ids
    assert ids == [tok.bos_id] + [i for a, b in zip(cuts, cuts[1:]) for i in tok.encode(long_text[a:b]).tolist()] + [
        tok.eos_id]


@pytest.mark.parametrize("pattern", [r"\p{L}+|\p{N}+|\s+(?!\S)|\s+|[^\s\p{L}\p{N}]+",
                                     r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+x?"""])
def test_a_regex_span_never_ends_where_a_lookahead_read(pattern, training_text):
    """A compiled regex's span ends only where its text alone is cut into the same pieces: before
    ``" \\n"`` + ``"x"`` a search of ``\\s+(?!\\S)`` read the ``x``, so a cut before it would change the
    pieces (``" "``, ``"\\n"`` in the whole text, one piece alone)."""
    tok = ByteBpeTrainer(80, pattern=pattern).train(training_text)
    rng = random.Random(29)
    for trial in range(60):
        text = "".join(rng.choice(["b \nx", "ab", "é\n\n   ", "12", " ", "\n", "x ", "  \n x", "'s"])
                       for _ in range(rng.randint(1, 40)))
        whole = tok.encode_documents([text], stream_chars=1 << 40)[0].tolist()
        for chars in (1, 3, 7, 16):
            got = tok.encode_documents([text], stream_chars=chars, piece_chars=1 << 40)[0].tolist()
            assert got == whole, (trial, chars, text)


def test_kinds_that_know_no_safe_place_encode_a_long_text_whole_whatever_piece_chars(tmp_path):
    """A tokenizer.json pipeline (or a SentencePiece model) sees the whole text: ``piece_chars`` never cuts
    its documents, also when a long JSONL line is read part by part (``encode_long``)."""
    import json

    from engine.tokenizers.hf_pipeline import HfBpeTokenizer
    from tests.naive_hf import build_family

    tok = HfBpeTokenizer(json.loads(build_family("qwen2", 300).to_str()))
    text = random_text(random.Random(31), 400)
    whole = tok.encode(text).tolist()
    assert [i for ids in streaming.encode_long(tok, text, None, stream_chars=8, piece_chars=16) for i in
            ids.tolist()] == whole
    assert [i for ids in streaming.encode_long(tok, _Parts(text, 13), None, stream_chars=8, piece_chars=16) for i in
            ids.tolist()] == whole
    values, _ = tok.encode_documents([text], stream_chars=8, piece_chars=16)
    before = [] if tok.bos_id is None else [tok.bos_id]
    assert values.tolist() == before + whole + [tok.eos_id]
