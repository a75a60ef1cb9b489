"""engine.tokenizers.stats: compare_tokenizers cuts continuous text where the corpus does."""

from engine.corpus import CorpusPartitions
from engine.tokenizers.stats import compare_tokenizers


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
