"""Engine classifies code points as its references do: tiktoken (Rust's ``regex`` crate) and Hugging
Face ``tokenizers`` (Oniguruma) both by Unicode 16.0, which the committed tables follow
(``engine.tokenizers.unicode_tables``, ``scripts/unicode_source.py``). Each reference is asked
directly, over every code point: tiktoken encodes only the text its regex matches, so a pattern that
is one class over single-byte ranks gives back the bytes of exactly the characters in that class;
Oniguruma's answer is what a ``Split(..., "removed")`` pre-tokenizer leaves. A reference that moves to
another Unicode fails here first, naming the class and the code points."""

import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.tokenizers.regex import compile_regex
from engine.tokenizers.unicode_ranges import UNICODE_VERSION
from engine.tokenizers.unicode_tables import LETTER, LOWER, NUMBER, SPACE, UPPER, code_point_classes

tiktoken = pytest.importorskip("tiktoken", reason="needs the test extra (pip install -e '.[test]')")
hf = pytest.importorskip("tokenizers", reason="needs the test extra (pip install -e '.[test]')")

CODE_POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
TEXT = "".join(map(chr, CODE_POINTS))
DATA = TEXT.encode("utf-8")

CLASSES = [r"\p{L}", r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}", r"\p{Mn}", r"\p{Mc}", r"\p{Me}",
           r"\p{N}", r"\p{Nd}", r"\p{Nl}", r"\p{No}", r"\p{P}", r"\p{S}", r"\p{Z}", r"\p{Cc}", r"\p{Cf}", r"\p{Co}",
           r"\p{Cn}", r"\s", r"\d", r"\w", r"\p{Han}", r"\p{Latin}", r"\p{Greek}", r"\p{Cyrillic}", r"\p{Arabic}",
           r"\p{Hiragana}", r"\p{Katakana}", r"\p{Hangul}", r"\p{Devanagari}", r"\p{Thai}", r"\p{Common}",
           r"\p{Inherited}", r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"]
# Oniguruma's \w takes the Latin-1 numbers ² ³ ¹ ¼ ½ ¾ and leaves the joiners U+200C/U+200D; tiktoken's does
# the reverse (engine.tokenizers.regex states the difference; dialect="oniguruma" compiles Oniguruma's).
ONIGURUMA_WORD = ({0xB2, 0xB3, 0xB9, 0xBC, 0xBD, 0xBE}, {0x200C, 0x200D})


def engine_set(cls: str, dialect: str = "regex") -> set[int]:
    spans = compile_regex(cls, dialect=dialect).find_spans(DATA)
    return {ord(DATA[a:b].decode("utf-8")) for a, b in spans.tolist()}


def tiktoken_set(cls: str) -> set[int]:
    enc = tiktoken.Encoding("probe", pat_str=cls, mergeable_ranks={bytes([b]): b for b in range(256)}, special_tokens={})
    return {ord(ch) for ch in bytes(enc.encode_ordinary(TEXT)).decode("utf-8")}


def oniguruma_set(cls: str) -> set[int]:
    split = hf.pre_tokenizers.Split(hf.Regex(cls), behavior="removed")
    left = {ord(ch) for piece, _ in split.pre_tokenize_str(TEXT) for ch in piece}
    return set(CODE_POINTS) - left


def differences(a: set[int], b: set[int]) -> str:
    return f"{len(a ^ b)} code points, first " + ", ".join(f"U+{cp:04X}" for cp in sorted(a ^ b)[:6])


def test_the_tables_are_unicode_16():
    assert UNICODE_VERSION == "16.0.0"
    unassigned = engine_set(r"\p{Cn}")
    assert 0x19182 in unassigned and 0x18E06 in unassigned  # assigned in Unicode 18.0
    assert 0x1C89 not in unassigned  # CYRILLIC CAPITAL LETTER TJE, Unicode 16.0
    assert 0x0295 in engine_set(r"\p{Ll}")  # Lo from Unicode 18.0 on


@pytest.mark.parametrize("cls", CLASSES)
def test_each_class_equals_tiktoken(cls):
    ours, theirs = engine_set(cls), tiktoken_set(cls)
    assert ours == theirs, f"{cls}: {differences(ours, theirs)}"


@pytest.mark.parametrize("cls", CLASSES)
def test_each_class_equals_oniguruma(cls):
    """As a tokenizer.json regex compiles (dialect "oniguruma"); only \\w differs from the other dialect."""
    ours, theirs = engine_set(cls, "oniguruma"), oniguruma_set(cls)
    assert ours == theirs, f"{cls}: {differences(ours, theirs)}"
    plain = engine_set(cls)
    assert plain ^ ours == (ONIGURUMA_WORD[0] | ONIGURUMA_WORD[1] if cls == r"\w" else set())


@pytest.mark.parametrize("cls", [r"\w", r"\W", r"[\w]", r"[\W]", r"[^\w]", r"[^\W]", r"[\d\w]", r"[^\w\s]", r"\b."])
def test_word_classes_inside_and_outside_brackets_equal_oniguruma(cls):
    r"""Oniguruma's bare \w takes ² ³ ¹ ¼ ½ ¾, its bracketed [\w] does not; neither takes ZWNJ/ZWJ."""
    ours, theirs = engine_set(cls, "oniguruma"), oniguruma_set(cls)
    assert ours == theirs, f"{cls}: {differences(ours, theirs)}"


def test_the_scanners_flags_equal_the_regex_classes():
    """The hand-written gpt2/cl100k/o200k scanners read code_point_classes: the same sets."""
    classes = code_point_classes()
    cps = np.asarray(CODE_POINTS)
    for flag, cls in ((LETTER, r"\p{L}"), (NUMBER, r"\p{N}"), (SPACE, r"\s"), (UPPER, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
                      (LOWER, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]")):
        flagged = set(cps[(classes[cps] & flag) != 0].tolist())
        assert flagged == tiktoken_set(cls), f"{cls}: {differences(flagged, tiktoken_set(cls))}"


# -- Hugging Face's components (engine.tokenizers.hf_unicode) ------------------------------------------

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import make_hf_unicode  # noqa: E402

from engine.tokenizers import hf_unicode  # noqa: E402
from engine.tokenizers.hf_components import build_normalizer  # noqa: E402


def ranges_of(flags: list[bool]) -> tuple[tuple[int, int], ...]:
    from unicode_source import runs

    return tuple(runs(flags))


def test_the_component_tables_are_what_tokenizers_does():
    """Asked again of the installed tokenizers: a new version that moves fails here, naming the table."""
    assert hf.__version__ == hf_unicode.TOKENIZERS_VERSION
    assert ranges_of(make_hf_unicode.isolated(hf.pre_tokenizers.Digits(individual_digits=True))) == hf_unicode.DIGIT_RANGES
    assert ranges_of(make_hf_unicode.isolated(hf.pre_tokenizers.Punctuation())) == hf_unicode.PUNCTUATION_RANGES
    assert ranges_of(make_hf_unicode.inside_word(hf.pre_tokenizers.Whitespace())) == hf_unicode.WORD_RANGES
    assert tuple(make_hf_unicode.lowercase()) == hf_unicode.LOWERCASE


def marks_and_composites() -> list[str]:
    """Every code point with normalization data in Python's unicodedata, with the probes that show it."""
    out = []
    for cp in CODE_POINTS:
        ch = chr(cp)
        if unicodedata.decomposition(ch) or unicodedata.combining(ch):
            out += [ch, "a" + ch + "\u0334", "a\u0301" + ch, unicodedata.normalize("NFD", ch),
                    "e" + ch + "\u0301\u0316", ch + ch]
    return out


@pytest.mark.parametrize("form", ["NFC", "NFD", "NFKC", "NFKD", "Lowercase"])
def test_normalizers_equal_tokenizers_on_every_code_point(form):
    ours, _ = build_normalizer({"type": form}, "test")
    theirs = getattr(hf.normalizers, form)()
    points = [cp for cp in CODE_POINTS if cp != 0x0A]
    text = "\n".join(map(chr, points))
    assert ours(text) == theirs.normalize_str(text)
    probes = marks_and_composites()
    got, want = [ours(p) for p in probes], [theirs.normalize_str(p) for p in probes]
    bad = [(p, g, w) for p, g, w in zip(probes, got, want) if g != w]
    assert not bad, f"{form}: {len(bad)} probes differ, first {bad[:3]!r}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(sorted({ch for p in marks_and_composites()[:6000] for ch in p} | set("aeiou ΣσSİ"))),
                max_size=24).map("".join))
def test_normalizers_equal_tokenizers_on_runs_of_marks(text):
    for form in ("NFC", "NFKC", "NFD", "Lowercase"):
        ours, _ = build_normalizer({"type": form}, "test")
        assert ours(text) == getattr(hf.normalizers, form)().normalize_str(text), form


def test_case_insensitive_matches_equal_both_references():
    """(?i)c matches what tiktoken's and Oniguruma's (?i) match, for every cased character engine
    takes (one whose full case folding has several characters is refused by name); the regex
    module's Turkic pairs I/ı and i/İ are not theirs."""
    from engine.errors import TokenizerError
    from engine.tokenizers.unicode_properties import FOLD_CLASSES

    cased = sorted({c for group in FOLD_CLASSES for c in group} | {0x130, 0x131})
    text = "".join(map(chr, cased))
    data = text.encode()
    checked, bad = 0, []
    for cp in cased:
        pattern = "(?i:\\x{%x})" % cp
        try:
            ours = {ord(data[a:b].decode()) for a, b in compile_regex(pattern).find_spans(data).tolist()}
        except TokenizerError:
            continue
        enc = tiktoken.Encoding("probe", pat_str=pattern, mergeable_ranks={bytes([b]): b for b in range(256)},
                                special_tokens={})
        theirs = {ord(ch) for ch in bytes(enc.encode_ordinary(text)).decode()}
        split = hf.pre_tokenizers.Split(hf.Regex(pattern), behavior="removed")
        onig = set(cased) - {ord(ch) for piece, _ in split.pre_tokenize_str(text) for ch in piece}
        checked += 1
        if not ours == theirs == onig:
            bad.append((hex(cp), sorted(map(hex, ours)), sorted(map(hex, theirs)), sorted(map(hex, onig))))
    assert checked > 2800 and not bad, bad[:5]
