"""``engine.prepare(...)`` from Python: the three forms of ``hash_split``, messages that name the
keyword as well as the flag, and unknown keywords refused with the name that was meant."""

import dataclasses
import inspect

import numpy as np
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.errors import ConfigurationError
from engine.pipeline import PrepareLimits, PrepareOptions, check_option_names, default_corpus_paths, prepare
from engine.prepare_options import PREPARE_PARAMETERS

CORPUS, SPLITS = default_corpus_paths()  # the bundled data/corpus.jsonl (49 documents) and data/splits.json
MAPPING = {"train": 0.8, "validation": 0.1, "test": 0.1}
FORMS = ('hash_split takes a mapping {"train": r, "validation": r, "test": r}, a sequence of three numbers '
         '(train, validation, test) or a string "R,R,R" like "0.8,0.1,0.1" (--hash-split R,R,R)')
FAST = dict(tokenizer="char", context_length=8, threads=1, quiet=True)


def _raises(call, *args, **kwargs) -> str:
    """The message of the ConfigurationError (exactly that class) ``call`` raises."""
    with pytest.raises(ConfigurationError) as info:
        call(*args, **kwargs)
    assert type(info.value) is ConfigurationError
    return str(info.value)


def _outputs(result) -> tuple[dict, dict]:
    """The report without its timings and paths, and every output file's bytes by relative path."""
    report = {k: v for k, v in result.report.items() if k not in ("seconds", "store")}
    report["tokenizer"] = {k: v for k, v in report["tokenizer"].items() if k != "path"}
    files = {str(p.relative_to(result.out_dir)): p.read_bytes() for p in sorted(result.out_dir.rglob("*"))
             if p.is_file() and p.name != "report.json"}
    return report, files


# -- hash_split: a mapping, three numbers, or "R,R,R" --------------------------------------------


@pytest.mark.parametrize("form", [(0.8, 0.1, 0.1), [0.8, 0.1, 0.1], "0.8,0.1,0.1", " 0.8 , 0.1 , 0.1 ",
                                  np.array([0.8, 0.1, 0.1]), MAPPING])
def test_every_form_resolves_to_the_mapping(form):
    options = PrepareOptions(CORPUS, hash_split=form)
    assert options.hash_split == MAPPING and type(options.hash_split) is dict
    assert all(type(r) is float for r in options.hash_split.values())
    assert options.manifest().ratios == (0.8, 0.1, 0.1)


def test_a_mapping_keeps_its_missing_partitions_at_zero():
    options = PrepareOptions(CORPUS, hash_split={"train": 1})
    assert options.hash_split == {"train": 1} and options.manifest().ratios == (1.0, 0.0, 0.0)


def test_the_forms_give_the_mapping_forms_result(tmp_path):
    expected = _outputs(prepare(CORPUS, None, tmp_path / "mapping", hash_split=MAPPING, **FAST))
    assert expected[0]["partitions"]["validation"]["documents"] == 4  # the split really splits
    assert "tokenizer.json" in expected[1] and any(name.startswith("store/") for name in expected[1])
    for name, form in (("tuple", (0.8, 0.1, 0.1)), ("list", [0.8, 0.1, 0.1]), ("string", "0.8,0.1,0.1")):
        assert _outputs(prepare(CORPUS, None, tmp_path / name, hash_split=form, **FAST)) == expected, name


@pytest.mark.parametrize("form, message", [
    ((0.9, 0.1), f"hash_split=(0.9, 0.1): 2 value(s), expected 3; {FORMS}"),
    ([0.5, 0.2, 0.2, 0.1], f"hash_split=[0.5, 0.2, 0.2, 0.1]: 4 value(s), expected 3; {FORMS}"),
    ("0.9,0.1", f"hash_split='0.9,0.1': not three comma-separated numbers; {FORMS}"),
    ("a,b,c", f"hash_split='a,b,c': not three comma-separated numbers; {FORMS}"),
    (True, f"hash_split=True (bool): not one of the accepted forms; {FORMS}"),
    (0.8, f"hash_split=0.8 (float): not one of the accepted forms; {FORMS}"),
    (b"abc", f"hash_split=b'abc' (bytes): not one of the accepted forms; {FORMS}"),
    ({0.8, 0.1}, f"hash_split={{0.8, 0.1}} (set): not one of the accepted forms; {FORMS}"),
    # the ratio checks are SplitManifest.by_hash's, whatever the form
    (("0.8", 0.1, 0.1), f"hash_split / --hash-split: split ratio for 'train' is '0.8', expected a finite number >= 0; {FORMS}"),
    ((True, False, False), f"hash_split / --hash-split: split ratio for 'train' is True, expected a finite number >= 0; {FORMS}"),
    ((0.9, -0.1, 0.2), "hash_split / --hash-split: split ratio for 'validation' is -0.1, expected a finite number >= "
                       f"0; {FORMS}"),
    ("0.9,-0.1,0.2", f"hash_split / --hash-split: split ratio for 'validation' is -0.1, expected a finite number >= 0; {FORMS}"),
    ((0, 0, 0), "hash_split / --hash-split: split ratios sum to 0.0, expected 1 (within 1e-9): "
                f"{{'train': 0, 'validation': 0, 'test': 0}}; {FORMS}"),
    ({"train": 0.9, "dev": 0.1}, "hash_split / --hash-split: split ratio key 'dev' is not a partition "
                                 f"(expected train, validation, test); {FORMS}"),
])
def test_other_forms_and_bad_ratios_are_configuration_errors(tmp_path, form, message):
    assert _raises(prepare, CORPUS, None, tmp_path / "o", hash_split=form, **FAST) == message
    assert not (tmp_path / "o").exists()


def test_the_string_form_is_read_by_the_clis_parser():
    with pytest.raises(ConfigurationError) as info:
        PrepareOptions(CORPUS, hash_split="0.9,0.1")
    assert str(info.value.__cause__) == ("--hash-split '0.9,0.1': expected three ratios train,validation,test "
                                         "like 0.8,0.1,0.1")


def test_the_cli_names_the_flag_for_bad_ratios(tmp_path):
    result = CliRunner().invoke(main, ["prepare", str(CORPUS), "--hash-split", "0,0,0", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert result.output == ("error: hash_split / --hash-split: split ratios sum to 0.0, expected 1 (within 1e-9): "
                             f"{{'train': 0.0, 'validation': 0.0, 'test': 0.0}}; {FORMS}\n")


# -- split messages: the keyword and the flag ----------------------------------------------------


def test_no_split_names_both_spellings(tmp_path):
    expected = (f"{CORPUS}: a multi-document corpus needs a split: pass --splits FILE / splits_path=FILE (a manifest "
                '{"train": [...], "validation": [...], "test": [...]}) or --hash-split 0.8,0.1,0.1 / '
                "hash_split=(0.8, 0.1, 0.1)")
    assert _raises(prepare, CORPUS, None, tmp_path / "o", **FAST) == expected
    result = CliRunner().invoke(main, ["prepare", str(CORPUS), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and result.output == f"error: {expected}\n"
    assert not (tmp_path / "o").exists()


def test_a_manifest_and_a_hash_split_name_both_spellings(tmp_path):
    assert _raises(prepare, CORPUS, SPLITS, tmp_path / "o", hash_split=MAPPING, **FAST) == (
        "pass either --splits FILE / splits_path=FILE or --hash-split R,R,R / hash_split=RATIOS, not both")


def test_a_continuous_text_names_both_spellings(tmp_path):
    text = tmp_path / "play.txt"
    text.write_text("ab" * 50, encoding="utf-8")
    assert _raises(prepare, text, None, tmp_path / "o", hash_split=(1, 0, 0), **FAST) == (
        f"{text}: a continuous text is split by position (--train-fraction / train_fraction); "
        "--splits / splits_path and --hash-split / hash_split apply to multi-document corpora only")


# -- option names ----------------------------------------------------------------------------------

VALID = ("corpus_path, splits_path, out_dir, tokenizer, merges, vocab_size, pattern, tie_break, fit_sample, "
         "max_types, context_length, stride, train_fraction, hash_split, on_invalid_utf8, skip_bad_lines, "
         "text_column, id_column, corpus_format, threads, resume, quiet, executor, ray_address, limits, format, "
         "messages_column, prompt_column, completion_column, chat_template, train_on, bos, eos")


@pytest.mark.parametrize("keywords, message", [
    ({"splits": "s.json"}, "unknown option 'splits' (did you mean 'splits_path'?)"),
    ({"context": 128}, "unknown option 'context' (did you mean 'context_length'?)"),
    ({"out": "o"}, "unknown option 'out' (did you mean 'out_dir'?)"),
    ({"corpus": "c.jsonl"}, "unknown option 'corpus' (did you mean 'corpus_path'?)"),
    ({"tokeniser": "char"}, "unknown option 'tokeniser' (did you mean 'tokenizer'?)"),
    ({"hashsplit": MAPPING}, "unknown option 'hashsplit' (did you mean 'hash_split'?)"),
    ({"thread": 2}, "unknown option 'thread' (did you mean 'threads'?)"),
    ({"column": "body"}, "unknown option 'column' (did you mean 'id_column', 'text_column' or 'prompt_column'?)"),
    ({"colour": "red"}, f"unknown option 'colour' (expected one of: {VALID})"),
    ({"fit": None}, f"unknown option 'fit' (expected one of: {VALID})"),  # derived, not an option
    ({"context": 128, "splits": "s.json"},
     "unknown option 'context' (did you mean 'context_length'?); unknown option 'splits' (did you mean 'splits_path'?)"),
])
def test_unknown_options_name_what_was_meant(tmp_path, keywords, message):
    assert _raises(prepare, CORPUS, None, tmp_path / "o", hash_split=MAPPING, **keywords) == message
    assert not (tmp_path / "o").exists()


def test_the_option_check_knows_prepares_own_parameters():
    parameters = [name for name, p in inspect.signature(prepare).parameters.items() if p.kind != p.VAR_KEYWORD]
    assert tuple(parameters) == PREPARE_PARAMETERS


@pytest.mark.parametrize("limits, message", [
    (dict(encode_chunk_documents=0), "limits.encode_chunk_documents must be positive (>= 1), got 0"),
    (dict(store_file_rows=2.5), "limits.store_file_rows must be an integer, got float 2.5"),
    (dict(read_batch_chars=True), "limits.read_batch_chars must be an integer, got the boolean True"),
])
def test_limits_are_checked_on_construction(limits, message):
    with pytest.raises(ConfigurationError) as info:
        PrepareLimits(**limits)
    assert str(info.value) == message


def test_limits_must_be_prepare_limits(tmp_path):
    assert _raises(prepare, CORPUS, None, tmp_path / "o", hash_split=MAPPING, limits={"store_file_rows": 4}) == (
        "limits is dict; expected a PrepareLimits")


def test_option_names_come_from_the_dataclass():
    fields = [f.name for f in dataclasses.fields(PrepareOptions) if f.init]
    assert fields[:3] == ["corpus", "splits", "out_dir"]  # what corpus_path, splits_path, out_dir fill
    check_option_names(dict.fromkeys(fields[3:]))  # every other field is a keyword
    assert ", ".join(["corpus_path", "splits_path", "out_dir", *fields[3:]]) == VALID


def test_subpackages_are_attributes_of_engine_on_first_use():
    """README's ``import engine; engine.tokenizers.load_tiktoken(...)`` works after a bare import,
    which imports neither the subpackage up front nor torch."""
    import subprocess
    import sys

    code = ("import sys, engine; assert 'engine.tokenizers' not in sys.modules; "
            "print(engine.tokenizers.load_tiktoken.__name__, engine.corpus.__name__, engine.store.__name__); "
            "assert 'torch' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "load_tiktoken engine.corpus engine.store\n"
    import engine

    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        engine.nonsense
