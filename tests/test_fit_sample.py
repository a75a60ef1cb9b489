"""--fit-sample (the fit sample rule of engine.corpus.fit_sample): the tokenizer fitted on a bounded
sample equals the one fitted on a corpus whose train partition is that sample written out, for any
thread count, read batch and encode chunk; held-out documents never enter it; bad bounds exit 2."""

import json
import random

import pytest
from click.testing import CliRunner

from engine.checks import MAX_FIT_SAMPLE_BYTES
from engine.cli import main
from engine.corpus import ReadLimits
from engine.corpus.fit_sample import CutText, FitSample, utf8_prefix
from engine.corpus.readers import iter_jsonl
from engine.errors import ConfigurationError
from engine.pipeline import PrepareLimits, prepare
from engine.tokenizers.base import FitOptions
from engine.tokenizers.loading import load_tokenizer

ATOMS = ["ka", "mi", "ro ", " ", "é", "Ω", "中文", "🙂", "'s ", "20", "\n", ", ", "x"]
SURROGATE = "\ud800"  # three bytes, as the store counts it (utf8_prefix only: the readers refuse it)
HELD_OUT = "Ж"  # only validation and test documents hold it


def naive_prefix(text: str, nbytes: int) -> str:
    """Characters of ``text`` one by one while their UTF-8 bytes fit in ``nbytes``."""
    out, used = [], 0
    for ch in text:
        size = len(ch.encode("utf-8", "surrogatepass"))
        if used + size > nbytes:
            break
        out.append(ch)
        used += size
    return "".join(out)


def naive_sample(docs, train_ids, limit):
    """The fit sample rule as a plain loop: (id, text) of the sample, in order."""
    taken, used = [], 0
    for doc_id, text in docs:
        if doc_id not in train_ids:
            continue
        size = len(text.encode("utf-8", "surrogatepass"))
        if used + size <= limit:
            taken.append((doc_id, text))
            used += size
            if used == limit:
                break
            continue
        cut = naive_prefix(text, limit - used)
        if cut:
            taken.append((doc_id, cut))
        break
    return taken


def random_text(rng, n, extra=()):
    atoms = ATOMS + list(extra)
    return "".join(rng.choice(atoms) for _ in range(n))


def write_corpus(path, docs):
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs), encoding="utf-8")
    return path


def write_manifest(path, train, validation, test):
    path.write_text(json.dumps({"train": train, "validation": validation, "test": test}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """40 documents, every fifth one validation or test (those hold ``HELD_OUT``; the first two are held out)."""
    rng = random.Random(28)
    docs, parts = [], {"train": [], "validation": [], "test": []}
    for i in range(40):
        held = i % 5 == 0 or i == 1
        part = ("validation" if i % 2 else "test") if held else "train"
        text = random_text(rng, rng.randrange(0, 60), [HELD_OUT] * 3 if held else ())
        docs.append((f"d{i:02d}", text))
        parts[part].append(f"d{i:02d}")
    root = tmp_path_factory.mktemp("fitsample")
    return (write_corpus(root / "corpus.jsonl", docs), write_manifest(root / "splits.json", **parts), docs, parts)


# -- the rule ------------------------------------------------------------------------------------


def test_utf8_prefix_equals_the_character_loop():
    rng = random.Random(5)
    texts = ["", "a", "é", "🙂", SURROGATE, "aé🙂\ud800中", "abc"] + [
        random_text(rng, rng.randrange(0, 30), [SURROGATE] * 2) for _ in range(200)]
    for text in texts:
        size = len(text.encode("utf-8", "surrogatepass"))
        for nbytes in range(0, size + 2):
            assert utf8_prefix(text, nbytes) == naive_prefix(text, nbytes), (text, nbytes)


def test_sample_equals_the_plain_loop_for_every_bound(corpus):
    _, _, docs, parts = corpus
    train = set(parts["train"])
    total = sum(len(t.encode("utf-8", "surrogatepass")) for i, t in docs if i in train)
    for limit in list(range(1, 200)) + [total - 1, total, total + 1, MAX_FIT_SAMPLE_BYTES]:
        sample = FitSample(limit)
        taken = [(i, t) for i, t in ((i, sample.take(i, t)) for i, t in docs if i in train) if t is not None]
        expected = naive_sample(docs, train, limit)
        assert taken == expected, limit
        assert sample.bytes == sum(len(t.encode("utf-8", "surrogatepass")) for _, t in expected) <= limit
        cut = expected[-1][0] if expected and expected[-1][1] != dict(docs)[expected[-1][0]] else None
        assert (sample.documents, sample.cut_document) == (len(expected), cut)
        assert sample.summary()["whole_train_partition"] == (limit >= total)


def test_a_text_left_in_its_file_is_cut_as_it_is_read(tmp_path):
    rng = random.Random(9)
    text = random_text(rng, 400, ['"', "\\", "\\\\"])
    path = write_corpus(tmp_path / "long.jsonl", [("long", text)])
    limits = ReadLimits(long_line_bytes=300, long_string_bytes=60, part_bytes=23, scan_block_bytes=50)
    [doc] = list(iter_jsonl(path, long_lines=True, limits=limits))
    assert not isinstance(doc.text, str) and str(doc.text) == text  # a LongText, read in parts
    size = len(text.encode("utf-8"))
    for limit in (1, 2, 3, 4, 5, 22, 23, 24, 100, 101, 102, size - 1, size):
        sample = FitSample(limit)
        taken = sample.take("long", doc.text)
        assert str(taken) == naive_prefix(text, limit), limit
        assert isinstance(taken, CutText) == (limit < size)
        assert sample.bytes == len(naive_prefix(text, limit).encode("utf-8"))


# -- prepare and tokenizers train --------------------------------------------------------------


def cut_corpus(tmp_path, docs, parts, limit):
    """The corpus whose train partition is the sample written out; held-out documents as they were."""
    sample = dict(naive_sample(docs, set(parts["train"]), limit))
    kept = [(i, sample.get(i, t)) for i, t in docs if i in sample or i not in parts["train"]]
    train = [i for i in parts["train"] if i in sample]
    return (write_corpus(tmp_path / "cut.jsonl", kept),
            write_manifest(tmp_path / "cut.json", train, parts["validation"], parts["test"]), sample)


@pytest.mark.parametrize("tokenizer, extra", [("byte-bpe", {"vocab_size": 300}), ("word", {}),
                                              ("bpe", {"merges": 30})])
def test_prepare_fits_the_sample_exactly_for_any_threads_and_chunks(corpus, tmp_path, tokenizer, extra):
    path, splits, docs, parts = corpus
    limit = 777
    cut_path, cut_splits, sample = cut_corpus(tmp_path, docs, parts, limit)
    assert len(sample) < len(parts["train"]) and list(sample.values())[-1] != dict(docs)[list(sample)[-1]]
    if tokenizer == "bpe":  # the classic kinds stop on held-out characters the sample lacks: none here
        docs = [(i, t) for i, t in docs if i in sample]
        path = write_corpus(tmp_path / "train_only.jsonl", docs)
        splits = write_manifest(tmp_path / "train_only.json", list(sample), [], [])
        cut_path, cut_splits, _ = cut_corpus(tmp_path, docs, {"train": list(sample), "validation": [], "test": []},
                                             limit)
    common = dict(tokenizer=tokenizer, context_length=4, quiet=True, **extra)
    expected = prepare(cut_path, cut_splits, tmp_path / "cut", threads=1, **common)
    hashes = set()
    for threads, limits in ((1, PrepareLimits()), (2, PrepareLimits()),
                            (2, PrepareLimits(read_batch_documents=3, read_batch_chars=17, encode_chunk_documents=2,
                                              encode_chunk_chars=11))):
        result = prepare(path, splits, tmp_path / f"s{threads}", threads=threads, limits=limits, fit_sample=limit,
                         **common)
        hashes.add(result.report["tokenizer"]["hash"])
        assert load_tokenizer(result.tokenizer_path).to_json() == load_tokenizer(expected.tokenizer_path).to_json()
        assert result.report["fit_sample"]["bytes"] == sum(len(t.encode("utf-8", "surrogatepass"))
                                                           for t in sample.values())
    assert hashes == {expected.report["tokenizer"]["hash"]}
    unbounded = prepare(path, splits, tmp_path / "all", threads=1, **common)
    assert unbounded.report["tokenizer"]["hash"] != expected.report["tokenizer"]["hash"]  # the bound mattered
    assert "fit_sample" not in unbounded.report


def test_held_out_documents_never_enter_the_sample(corpus, tmp_path):
    path, splits, docs, parts = corpus
    runner = CliRunner()
    for limit in (5, 300, 10**6):
        out = tmp_path / f"char{limit}.json"
        done = runner.invoke(main, ["tokenizers", "train", str(path), "--splits", str(splits), "--kind", "char",
                                    "--fit-sample", str(limit), "--out", str(out)])
        assert done.exit_code == 0, done.output
        sample = naive_sample(docs, set(parts["train"]), limit)
        alphabet = load_tokenizer(out).to_json()["payload"]["alphabet"]
        assert alphabet == "".join(sorted(set("".join(t for _, t in sample))))
        assert HELD_OUT not in alphabet
        result = prepare(path, splits, tmp_path / f"o{limit}", tokenizer="byte-bpe", merges=5, context_length=4,
                         quiet=True, fit_sample=limit)
        used = sum(len(t.encode("utf-8", "surrogatepass")) for _, t in sample)
        whole = limit == 10**6
        taken_whole = {i for i, t in sample if t == dict(docs)[i]}
        left = sum(1 for i in parts["train"] if dict(docs)[i] and i not in taken_whole)
        assert result.report["fit_sample"] == {
            "limit_bytes": limit, "bytes": used, "documents": len(sample),
            "cut_document": None if whole else sample[-1][0], "left_out_documents": left,
            "whole_train_partition": whole}
        assert done.output.splitlines()[0].startswith(f"fit sample: {used:,} of at most {limit:,} bytes, ")


def test_the_summary_names_the_sample(corpus, tmp_path):
    path, splits, docs, parts = corpus
    done = CliRunner().invoke(main, ["prepare", str(path), "--splits", str(splits), "--tokenizer", "byte-bpe",
                                     "--merges", "3", "--context", "4", "--fit-sample", "300", "--quiet",
                                     "--out", str(tmp_path / "o")])
    assert done.exit_code == 0, done.output
    sample = naive_sample(docs, set(parts["train"]), 300)
    line = [line for line in done.output.splitlines() if line.startswith("fit sample:")]
    whole = {i for i, t in sample if t == dict(docs)[i]}
    left = sum(1 for i in parts["train"] if dict(docs)[i] and i not in whole)
    assert line == [f"fit sample: 300 of at most 300 bytes, {len(sample)} training documents (the last, "
                    f"{sample[-1][0]}, cut); {left} training documents left out, whole or in part"]


def test_a_continuous_text_samples_its_train_part(tmp_path):
    text = "".join(random.Random(3).choice(["ab", "c", "é", " ", "中"]) for _ in range(400))
    path = tmp_path / "play.txt"
    path.write_text(text, encoding="utf-8")
    result = prepare(path, None, tmp_path / "o", tokenizer="byte-bpe", merges=20, context_length=4, quiet=True,
                     fit_sample=101)
    (tmp_path / "cut.txt").write_text(naive_prefix(text, 101), encoding="utf-8")
    expected = prepare(tmp_path / "cut.txt", None, tmp_path / "c", tokenizer="byte-bpe", merges=20, context_length=4,
                       quiet=True, train_fraction=1.0)
    assert result.report["tokenizer"]["hash"] == expected.report["tokenizer"]["hash"]
    assert result.report["fit_sample"]["bytes"] == len(naive_prefix(text, 101).encode("utf-8"))


# -- bad bounds ---------------------------------------------------------------------------------

RANGE = f"--fit-sample must be 1..{MAX_FIT_SAMPLE_BYTES:,} bytes, got "
NOT_A_NUMBER = ("--fit-sample must be a whole number of bytes (e.g. 1000000, 64MB or 1GiB; units: B, kB, KB, MB, GB, "
                "TB, KiB, MiB, GiB, TiB), got ")


@pytest.mark.parametrize("value, message", [
    ("0", RANGE + "0"), ("-1", RANGE + "-1"), (str(MAX_FIT_SAMPLE_BYTES + 1), RANGE + f"{MAX_FIT_SAMPLE_BYTES + 1:,}"),
    ("257TiB", RANGE + f"{257 << 40:,}"), ("abc", NOT_A_NUMBER + "'abc'"), ("1.5", NOT_A_NUMBER + "'1.5'"),
    ("²", NOT_A_NUMBER + "'²'"), ("12 parsecs", NOT_A_NUMBER + "'12 parsecs'"), ("", NOT_A_NUMBER + "''"),
    ("9" * 5000, NOT_A_NUMBER + repr("9" * 5000)),
])
@pytest.mark.parametrize("command", ["prepare", "train"])
def test_bad_bounds_exit_2_before_anything_is_read(corpus, tmp_path, value, message, command):
    path, splits, _, _ = corpus
    out = tmp_path / "out"
    args = (["prepare", str(path), "--splits", str(splits), "--out", str(out), "--quiet"] if command == "prepare" else
            ["tokenizers", "train", str(path), "--splits", str(splits), "--kind", "bpe", "--out", str(out)])
    done = CliRunner().invoke(main, args + [f"--fit-sample={value}"])
    assert done.exit_code == 2, done.output
    assert message in done.output
    assert not out.exists()


@pytest.mark.parametrize("value, message", [
    (0, RANGE + "0"), (-5, RANGE + "-5"), (1 << 49, RANGE + f"{1 << 49:,}"), (2.0, "--fit-sample must be a whole "
                                                                               "number of bytes, got float 2.0"),
    (True, "--fit-sample must be a whole number of bytes, got the boolean True"), ("x", NOT_A_NUMBER + "'x'"),
])
def test_bad_bounds_are_configuration_errors_in_python(corpus, tmp_path, value, message):
    path, splits, _, _ = corpus
    with pytest.raises(ConfigurationError) as info:
        prepare(path, splits, tmp_path / "o", fit_sample=value, quiet=True)
    assert str(info.value) == message
    with pytest.raises(ConfigurationError) as info:
        FitOptions(fit_sample=value)
    assert str(info.value) == message


def test_units_and_where_the_bound_applies(corpus, tmp_path):
    assert [FitOptions(fit_sample=v).fit_sample for v in ("64MB", "1GiB", "1_000", " 7 ", 5, "3kB", "2KiB")] == [
        64_000_000, 1 << 30, 1000, 7, 5, 3000, 2048]
    path, splits, _, _ = corpus
    tok = tmp_path / "t.json"
    prepare(path, splits, tmp_path / "o", tokenizer="byte-bpe", merges=2, quiet=True, context_length=4)
    (tmp_path / "o" / "tokenizer.json").rename(tok)
    with pytest.raises(ConfigurationError, match="--fit-sample applies when prepare fits a tokenizer"):
        prepare(path, splits, tmp_path / "p", tokenizer=str(tok), fit_sample=10, quiet=True)


# -- the type cap (--max-types) -----------------------------------------------------------------


@pytest.mark.parametrize("tokenizer, extra", [("byte-bpe", {"merges": 40}), ("word", {})])
def test_max_types_fits_the_most_frequent_types_for_any_threads_and_chunks(corpus, tmp_path, tokenizer, extra):
    from engine.tokenizers.base import trainer_for
    from engine.tokenizers.type_table import count_types

    path, splits, docs, parts = corpus
    trainer = trainer_for(tokenizer, FitOptions(unknown="<unk>", **extra))
    train = set(parts["train"])
    full = count_types(trainer, [[t for i, t in docs if i in train]], 1)
    types, counts = full.types(), full.counts().tolist()
    limit = len(types) // 3
    ranked = sorted(range(len(types)), key=lambda i: (-counts[i], i))[:limit]
    kept = sorted(ranked)
    expected = trainer.train_from_counts([types[i] for i in kept], [counts[i] for i in kept])
    common = dict(tokenizer=tokenizer, context_length=4, quiet=True, max_types=limit, **extra)
    for threads, limits in ((1, PrepareLimits()), (2, PrepareLimits(read_batch_documents=3, read_batch_chars=17,
                                                                    encode_chunk_documents=2))):
        result = prepare(path, splits, tmp_path / f"t{threads}", threads=threads, limits=limits, **common)
        assert result.report["tokenizer"]["hash"] == expected.hash
        assert result.report["max_types"] == {"limit": limit, "types": len(types), "kept": limit,
                                              "dropped": len(types) - limit}
    whole = prepare(path, splits, tmp_path / "all", **{**common, "max_types": len(types)})
    assert whole.report["tokenizer"]["hash"] == trainer.train_from_counts(types, counts).hash != expected.hash
    assert whole.report["max_types"]["dropped"] == 0


def test_max_types_with_a_fit_sample_caps_the_sample(corpus, tmp_path):
    path, splits, docs, parts = corpus
    cut_path, cut_splits, _ = cut_corpus(tmp_path, docs, parts, 500)
    common = dict(tokenizer="word", context_length=4, quiet=True, max_types=7)
    sampled = prepare(path, splits, tmp_path / "s", fit_sample=500, **common)
    assert sampled.report["tokenizer"]["hash"] == prepare(cut_path, cut_splits, tmp_path / "c", **common).report[
        "tokenizer"]["hash"]
    assert sampled.report["tokenizer"]["vocab_size"] == 7 + 3  # <bos>, <eos>, <unk>
    done = CliRunner().invoke(main, ["prepare", str(path), "--splits", str(splits), "--tokenizer", "word",
                                     "--max-types", "7", "--context", "4", "--quiet", "--out", str(tmp_path / "o")])
    assert done.exit_code == 0, done.output
    types = sampled.report["max_types"]["types"]
    unsampled = json.loads((tmp_path / "o" / "report.json").read_text())["max_types"]
    assert unsampled["kept"] == 7 and unsampled["types"] > types
    assert (f"max types: kept 7 of {unsampled['types']:,} types (at most 7; {unsampled['types'] - 7:,} dropped)"
            in done.output.splitlines())


@pytest.mark.parametrize("args, message", [
    (["--max-types", "0"], "--max-types must be positive (>= 1), got 0"),
    (["--max-types", "-3"], "--max-types must be positive (>= 1), got -3"),
    (["--max-types", str((1 << 40) + 1)], f"--max-types is {(1 << 40) + 1}, larger than the largest allowed value "
                                           f"{1 << 40}"),
    (["--max-types", "many"], "'many' is not a valid integer"),
    (["--max-types", "5", "--tokenizer", "bpe"], "--max-types applies to --tokenizer word, byte-bpe, not bpe"),
    (["--max-types", "5", "--tokenizer", "char"], "--max-types applies to --tokenizer word, byte-bpe, not char"),
])
def test_bad_type_caps_exit_2(corpus, tmp_path, args, message):
    path, splits, _, _ = corpus
    done = CliRunner().invoke(main, ["prepare", str(path), "--splits", str(splits), "--quiet", "--out",
                                     str(tmp_path / "o"), *args])
    assert done.exit_code == 2, done.output
    assert message in done.output
    assert not (tmp_path / "o").exists()


def test_tokenizers_train_caps_types_as_prepare_does(corpus, tmp_path):
    path, splits, _, _ = corpus
    runner = CliRunner()
    for bounds in (["--max-types", "9"], ["--max-types", "9", "--fit-sample", "400"]):
        out = tmp_path / "b.json"
        done = runner.invoke(main, ["tokenizers", "train", str(path), "--splits", str(splits), "--kind", "bpe",
                                    "--level", "byte", "--merges", "25", "--force", "--out", str(out), *bounds])
        assert done.exit_code == 0, done.output
        keywords = dict(zip([b.lstrip("-").replace("-", "_") for b in bounds[::2]], [int(v) for v in bounds[1::2]]))
        result = prepare(path, splits, tmp_path / "p", tokenizer="byte-bpe", merges=25, context_length=4, quiet=True,
                         **keywords)
        assert load_tokenizer(out).hash == result.report["tokenizer"]["hash"]
        capped = result.report["max_types"]
        assert (f"max types: kept 9 of {capped['types']:,} types (at most 9; {capped['types'] - 9:,} dropped)"
                in done.output.splitlines())
    done = runner.invoke(main, ["tokenizers", "train", str(path), "--splits", str(splits), "--kind", "char",
                                "--max-types", "9", "--out", str(tmp_path / "c.json")])
    assert done.exit_code == 2 and "--max-types applies to --kind word and --kind bpe --level byte, not --kind char" in (
        done.output)
