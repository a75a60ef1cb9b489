"""Hand-computed checks of the tokenizers against SPEC §3 (exact ids, merges, history, table)."""

from engine.corpus import CorpusPartitions
from engine.tokenizers.bpe import BpeTokenizer, BpeTrainer
from engine.tokenizers.char import CharTokenizer
from engine.tokenizers.stats import compare_tokenizers
from engine.tokenizers.word import WordTokenizer


def test_compare_cuts_continuous_text_where_the_corpus_does():
    # 0.29 of 100 characters is 29 (float arithmetic gives 28.999... and would cut at 28).
    text = "ab " * 33 + "a"
    report = compare_tokenizers(text, train_fraction=0.29, merges=2)
    assert report["train_characters"] == 29
    assert report["validation_characters"] == 71
    parts = CorpusPartitions.from_text(text, 0.29)
    assert len(parts.documents("train")[0].text) == report["train_characters"]
    char = {row["scheme"]: row for row in report["schemes"]}["char"]
    assert char["train_tokens"] == 29 and char["validation_tokens"] == 71


def test_char_ids_are_specials_then_sorted_characters():
    tok = CharTokenizer.fit("hello world")
    assert tok.vocab_size == 10
    assert tok.encode("hello").tolist() == [5, 4, 6, 6, 7]
    assert tok.encode_document("").tolist() == [0, 1]


def test_word_ids_and_unknown_count():
    tok = WordTokenizer.fit("hello world, hello!", unknown="<unk>")
    assert tok.encode("hi world hi hello").tolist() == [2, 3, 7, 3, 2, 3, 6]
    assert tok.last_unknown_count == 2


def test_bpe_tie_rule_orders_by_word_rank_then_offset():
    # (a,b) first occurs in word 0 at offset 1; (b,a) only in word 3 though more often there.
    tok = BpeTrainer(3).train("cab ab ba ba")
    assert tok.merges == [("a", "b"), ("b", "a"), ("c", "ab")]
    assert tok.history == [(0, 12), (1, 10), (2, 8), (3, 7)]


def test_bpe_replaces_left_to_right_without_overlap():
    tok = BpeTokenizer(" a", [("a", "a")])
    assert tok.tokenize("aaaa aaa") == ["aa", "aa", " ", "aa", "a"]
    assert tok.encode("aaaa aaa").tolist() == [4, 4, 2, 4, 3]
