"""``engine tokenizers compare`` and ``train`` through click's CliRunner; ``compare_tokenizers`` values."""

import json

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.corpus import Partition, SplitManifest
from engine.pipeline import default_corpus_paths
from engine.tokenizers import load_tokenizer
from engine.tokenizers.stats import compare_tokenizers, vocabulary_after_merges
from tests.helpers import run

# cut = 9: train "aaab aab " (alphabet " ab"), validation "aab ab xa" ('x' unseen).
TEXT = "aaab aab aab ab xa"


def test_compare_exact_values():
    report = compare_tokenizers(TEXT, train_fraction=0.5, merges=2, context=64)
    assert report["train_characters"] == 9 and report["validation_characters"] == 9
    char, word, bpe = report["schemes"]
    assert char == {"scheme": "char", "vocab_size": 3, "train_tokens": 9, "validation_tokens": 9,
                    "chars_per_token": 1.0, "unknown_rate": 1 / 9, "context_characters": 64.0}
    # Word: pieces {" ", "aaab", "aab"}; validation pieces aab ␣ ab ␣ xa, of which ab and xa are unseen.
    assert word == {"scheme": "word", "vocab_size": 3, "train_tokens": 4, "validation_tokens": 5,
                    "chars_per_token": 2.25, "unknown_rate": 0.4, "context_characters": 144.0}
    # BPE: (a,a) then (aa,a); validation "aab ab " + x + "a" = (aa b)(␣)(a b)(␣) + x + a = 8 tokens.
    assert bpe == {"scheme": "bpe", "vocab_size": 5, "train_tokens": 6, "validation_tokens": 8,
                   "chars_per_token": 1.5, "unknown_rate": 0.125, "context_characters": 96.0}
    assert report["bpe"] == {"merges": [["a", "a"], ["aa", "a"]], "history": [[0, 9], [1, 7], [2, 6]]}
    assert vocabulary_after_merges(3, report["bpe"]["merges"]) == [3, 4, 5]


def test_compare_json_cli(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    result = CliRunner().invoke(main, ["tokenizers", "compare", str(path), "--train-fraction", "0.5",
                                       "--merges", "2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert list(report) == ["train_characters", "validation_characters", "schemes", "bpe"]
    assert [row["scheme"] for row in report["schemes"]] == ["char", "word", "bpe"]
    assert list(report["schemes"][0]) == ["scheme", "vocab_size", "train_tokens", "validation_tokens",
                                          "chars_per_token", "unknown_rate", "context_characters"]
    assert report["schemes"][2]["validation_tokens"] == 8


def test_compare_table_and_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="needs the plot extra (pip install -e '.[plot]')")
    path = tmp_path / "text.txt"
    path.write_text(TEXT * 3, encoding="utf-8")
    plot = tmp_path / "bpe.png"
    result = CliRunner().invoke(main, ["tokenizers", "compare", str(path), "--merges", "3", "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    assert "scheme" in result.output and "bpe" in result.output and "chars/token" in result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_bad_fraction_is_a_clean_error(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    result = CliRunner().invoke(main, ["tokenizers", "compare", str(path), "--train-fraction", "1.5"])
    assert result.exit_code == 2 and "train_fraction" in result.output


def test_train_txt_uses_train_part_only(tmp_path):
    path = tmp_path / "play.txt"
    path.write_text("abab abab ab\nXYZ", encoding="utf-8")  # 16 characters, cut at 12
    out = tmp_path / "bpe.json"
    result = CliRunner().invoke(main, ["tokenizers", "train", str(path), "--kind", "bpe", "--merges", "2",
                                       "--train-fraction", "0.75", "--out", str(out)])
    assert result.exit_code == 0, result.output
    tok = load_tokenizer(out)
    assert tok.alphabet == " ab"
    assert tok.merges == [("a", "b"), ("ab", "ab")]


def test_train_jsonl_with_splits(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(d) for d in [
        {"id": "d1", "text": "the cat"}, {"id": "d2", "text": "the hat"}, {"id": "d3", "text": "QQQ"},
    ]) + "\n", encoding="utf-8")
    splits = tmp_path / "splits.json"
    splits.write_text(json.dumps({"train": ["d1", "d2"], "validation": ["d3"], "test": []}), encoding="utf-8")
    out = tmp_path / "word.json"
    result = CliRunner().invoke(main, ["tokenizers", "train", str(corpus), "--splits", str(splits), "--kind", "word",
                                       "--unknown", "<unk>", "--out", str(out)])
    assert result.exit_code == 0, result.output
    tok = load_tokenizer(out)
    assert tok.pieces == [" ", "cat", "hat", "the"] and tok.unknown == "<unk>"
    char_out = tmp_path / "char.json"
    result = CliRunner().invoke(main, ["tokenizers", "train", str(corpus), "--splits", str(splits), "--kind", "char",
                                       "--out", str(char_out)])
    assert result.exit_code == 0, result.output
    assert load_tokenizer(char_out).alphabet == " aceht"  # "QQQ" is validation only


def test_train_errors(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d1", "text": "x"}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["tokenizers", "train", str(corpus), "--kind", "char", "--out",
                                       str(tmp_path / "t.json")])
    assert result.exit_code == 2 and "--splits" in result.output
    result = CliRunner().invoke(main, ["tokenizers", "train", str(corpus), "--kind", "char", "--merges", "3",
                                       "--out", str(tmp_path / "t.json")])
    assert result.exit_code == 2 and "--kind bpe" in result.output


def test_help_has_examples():
    for args in (["tokenizers", "--help"], ["tokenizers", "compare", "--help"], ["tokenizers", "train", "--help"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and "Example:" in result.output


def test_train_byte_level_hands_over(tmp_path):
    path = tmp_path / "play.txt"
    path.write_text("hello hello world\n" * 4, encoding="utf-8")
    out = tmp_path / "byte.json"
    result = CliRunner().invoke(main, ["tokenizers", "train", str(path), "--kind", "bpe", "--level", "byte",
                                       "--merges", "5", "--out", str(out)])
    assert result.exit_code == 0, result.output
    tok = load_tokenizer(out)
    assert tok.kind != "bpe" and tok.decode(tok.encode("hello world")) == "hello world"


def test_tokenizers_train_takes_a_hash_split(tmp_path):
    corpus, _ = default_corpus_paths()
    out = tmp_path / "char.json"
    result = run("tokenizers", "train", corpus, "--kind", "char", "--hash-split", "0.8,0.1,0.1", "--out", out)
    assert result.exit_code == 0, result.output
    rule = SplitManifest.by_hash({"train": 0.8, "validation": 0.1, "test": 0.1})
    train_text = "".join(json.loads(line)["text"] for line in corpus.read_text(encoding="utf-8").splitlines()
                         if line.strip() and rule.partition_of(json.loads(line)["id"]) == Partition.TRAIN)
    from engine.tokenizers.loading import load_tokenizer

    assert load_tokenizer(out).vocab_size == 2 + len(set(train_text))


# -- the CLI -------------------------------------------------------------------------------------------


def test_cli_invalid_utf8_policy_for_compare(tmp_path):
    text = tmp_path / "play.txt"
    text.write_bytes(b"to be or not\xff to be")
    result = CliRunner().invoke(main, ["tokenizers", "compare", str(text), "--merges", "2", "--context", "2"])
    assert result.exit_code == 2
    assert result.stderr == (f"error: {text}: invalid UTF-8 at byte offset 12 (byte 0xff); expected UTF-8 text "
                             "(--on-invalid-utf8 replace or skip accepts it)\n")
    result = CliRunner().invoke(main, ["tokenizers", "compare", str(text), "--merges", "2", "--context", "2",
                                       "--on-invalid-utf8", "replace", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)


def byte_ranks(path):
    """A tiktoken rank file of the 256 single bytes (rank = byte value), no merges."""
    import base64

    path.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)), encoding="ascii")
    return path


@pytest.mark.parametrize("given, value, missing", [("--bos", "<s>", "eos"), ("--eos", "</s>", "bos")])
def test_import_names_both_wrappers_or_neither(tmp_path, given, value, missing):
    """``--bos X`` alone used to make X the EOS too; one of the two alone is now an error naming both flags."""
    ranks, out = byte_ranks(tmp_path / "bytes.tiktoken"), tmp_path / "t.json"
    specials = ["--special", "<s>=256", "--special", "</s>=257"]
    result = run("tokenizers", "import", ranks, *specials, given, value, "--out", out)
    assert result.exit_code == 2 and not out.exists()
    assert result.output == (
        f"error: {ranks}: {given[2:]} token {value!r} given without {missing}: name both (CLI: --bos and --eos; "
        f"the same token twice, e.g. --bos {value!r} --eos {value!r}, wraps documents GPT-2 style)\n")
    result = run("tokenizers", "import", ranks, *specials, "--bos", "<s>", "--eos", "</s>", "--out", out)
    assert result.exit_code == 0, result.output
    tok = load_tokenizer(out)
    assert (tok.bos, tok.bos_id, tok.eos, tok.eos_id) == ("<s>", 256, "</s>", 257)
    assert tok.encode_document("hi").tolist() == [256, 104, 105, 257]
    result = run("tokenizers", "import", ranks, *specials, "--bos", "<s>", "--eos", "<s>", "--out", out)
    assert result.exit_code == 0 and load_tokenizer(out).encode_document("").tolist() == [256, 256]
