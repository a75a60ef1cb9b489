"""engine.commands.splits: `engine splits` writes the hash manifest that prepare applies."""

import json

from engine.corpus import Partition, SplitManifest
from engine.pipeline import default_corpus_paths
from tests.helpers import run


def test_splits_command_writes_the_hash_manifest_that_prepare_applies(tmp_path):
    corpus, _ = default_corpus_paths()
    out = tmp_path / "splits.json"
    result = run("splits", corpus, "--hash-split", "0.8,0.1,0.1", "--out", out)
    assert result.exit_code == 0, result.output
    ids = [json.loads(line)["id"] for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    rule = SplitManifest.by_hash({"train": 0.8, "validation": 0.1, "test": 0.1})
    expected = {p.value: [i for i in ids if rule.partition_of(i) == p] for p in Partition}
    assert json.loads(out.read_text()) == expected
    assert [len(v) for v in expected.values()] == [40, 4, 5]
    assert result.output.strip() == f"train 40, validation 4, test 5 documents; wrote {out}"

    by_file = run("prepare", corpus, "--splits", out, "--tokenizer", "char", "--out", tmp_path / "a", "--quiet", "--json")
    by_hash = run("prepare", corpus, "--hash-split", "0.8,0.1,0.1", "--tokenizer", "char", "--out", tmp_path / "b",
                  "--quiet", "--json")
    assert by_file.exit_code == 0 and by_hash.exit_code == 0, by_file.output + by_hash.output
    assert json.loads(by_file.output)["partitions"] == json.loads(by_hash.output)["partitions"]

    again = run("splits", corpus, "--hash-split", "0.8,0.1,0.1", "--out", out)
    assert again.exit_code == 2 and "exists; pass --force to replace it" in again.output
    assert run("splits", corpus, "--hash-split", "0.8,0.1,0.1", "--out", out, "--force").exit_code == 0


def test_splits_command_refuses_a_continuous_text(tmp_path):
    text = tmp_path / "play.txt"
    text.write_text("To be, or not to be.", encoding="utf-8")
    result = run("splits", text, "--hash-split", "0.8,0.1,0.1", "--out", tmp_path / "s.json")
    assert result.exit_code == 2 and "split by position" in result.output


def test_splits_keeps_only_ids_a_long_line_stays_in_its_file(tmp_path, monkeypatch):
    """engine splits needs ids only: texts are streamed past, a line past the readers' long_line_bytes is
    never held (one 1,000 MB line peaked at 2 GB), and duplicate ids are still refused."""
    import functools
    import json

    from click.testing import CliRunner

    import engine.commands.splits as splits_command
    import engine.corpus.long_lines as long_lines
    from engine.cli import main
    from engine.corpus import ReadLimits, ReadReport

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({"id": i, "text": t}) for i, t in
                                [("long", "word " * 500), ("a", "x"), ("b", "y")]) + "\n", encoding="utf-8")
    held = []
    real = long_lines.read_long_line

    def spy(*args, **kwargs):
        result = real(*args, **kwargs)
        held.append(result is not None)  # the long line was scanned, its text left in the file
        return result

    monkeypatch.setattr(long_lines, "read_long_line", spy)
    tiny = ReadLimits(long_line_bytes=200, long_string_bytes=100)
    ids = splits_command.corpus_ids(corpus, text_column="text", id_column=None, report=ReadReport(), limits=tiny)
    assert ids == ["long", "a", "b"] and held == [True]
    # The command reads through corpus_ids: with the same small limits, the same scan, and the manifest.
    monkeypatch.setattr(splits_command, "corpus_ids", functools.partial(splits_command.corpus_ids, limits=tiny))
    out = tmp_path / "s.json"
    result = CliRunner().invoke(main, ["splits", str(corpus), "--hash-split", "1,0,0", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text()) == {"train": ["long", "a", "b"], "validation": [], "test": []}
    assert held == [True, True]
    corpus.write_text(corpus.read_text() + json.dumps({"id": "a", "text": "again"}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["splits", str(corpus), "--hash-split", "1,0,0", "--out", str(out), "--force"])
    assert result.exit_code == 2 and "duplicate id 'a'" in result.output
