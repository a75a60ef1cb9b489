"""Pre-tokenizer kernels against ``regex.findall`` (the patterns' definition), piece for piece."""

import unicodedata

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import TokenizerError
from engine.tokenizers.pretokenize import pretokenize, pretokenize_bytes
from engine.tokenizers.unicode_tables import LETTER, LOWER, NUMBER, SPACE, UPPER, WHITE_SPACE, code_point_classes
from tests.naive_byte_bpe import naive_pretokenize, stdlib_texts
from tests.helpers import newer_than_tables

PATTERNS = ["gpt2", "cl100k", "o200k"]
WHITESPACE = [" ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0",
              "\u1680", "\u2000", "\u2009", "\u200b", "\u2028", "\u2029", "\u202f", "\u3000", "  ", "\n\n", " \n "]
LETTERS = ["a", "Z", "é", "ß", "Ω", "Ж", "ع", "ह", "中", "ア", "한", "ſ", "ǅ", "ʰ", "e\u0301", "\u0308", "x",
           "HELLO", "World", "ǈ", "ᾈ", "ⅰ", "Ⅰ", "ª", "ᵃ", "ǃ", "\u0903", "\u20dd", "\U0001d400"]
DIGITS = ["0", "7", "٣", "५", "Ⅷ", "²", "½", "123", "4567"]
OTHER = ["'", "''", "'s", "'S", "'t", "'Ll", "'lL", "'ve", "'VE", "'re", "'rE", "'m", "'M", "'d", "'D", "'ſ", "'x",
         "!", "?!", ".", "-", "_", "(", "/", "//", "😀", "👍🏽", "\x00", "\x01", "\u200d", "\ufeff", "€", "’s", "🇫🇷"]
FRAGMENTS = WHITESPACE + LETTERS + DIGITS + OTHER


def assert_same_pieces(text, pattern):
    got = pretokenize(text, pattern)
    want = naive_pretokenize(text, pattern)
    if got != want:
        i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        pytest.fail(f"{pattern}: first difference at piece {i}: {got[i:i + 3]!r} != {want[i:i + 3]!r}")


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS), max_size=40))
def test_fragments_match_regex(pattern, parts):
    assert_same_pieces("".join(parts), pattern)


# Single characters around the ASCII fast path's exits: ASCII classes next to bytes >= 0x80.
ASCII_EDGES = [" ", "  ", "a", "Z", "7", "'", "'s", "'T", "\t", "\n", "\r", ".", "/", "_", "é", "\xa0", "\u2028", "ſ",
               "٣", "😀", "\u0301"]


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(ASCII_EDGES), max_size=40))
def test_ascii_fast_path_edges_match_regex(pattern, parts):
    assert_same_pieces("".join(parts), pattern)


# Any code point but a surrogate (which no UTF-8 text holds): assigned or not, old or new, but for those
# the regex module's newer Unicode assigns (tests/test_unicode_version.py checks those against tiktoken).
ASSIGNED = st.characters(exclude_categories=("Cs",)).filter(lambda c: ord(c) not in newer_than_tables())


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=ASSIGNED, max_size=60))
def test_any_text_matches_regex(pattern, text):
    assert_same_pieces(text, pattern)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_edge_cases(pattern):
    for text in ["", " ", "  ", "a", " a", "  a", "a ", "a  ", "\n", "\r\n", " \r\n ", "'", "'s", "x's", "'ll'",
                 "123456789", " 12", "  ?!\n\n", "\t\ta", "\u3000a", "a\u0301b", "ſ'ſ", "\n \n", "a\n\n\n b",
                 "don't DON'T You'LL", "  \x0b\x0c x", "\x1c\x1da", " !!\r\n\r\nx"]:
        assert_same_pieces(text, pattern)


O200K_EDGES = [
    "HELLOworld", "helloWORLD", "HelloWorld", "HELLO", "HELLO world", "don'T", "DON'T", "don'tcha", "I'M", "we'Re",
    "they'VE", "she'LL", "it'ſ", "HE'S", "x'q", "'s", "''s", "ǅemo", "ǅ", "ǄEMO", "Ǆemo", "aǅb", "ᾈᾀ",
    "e\u0301", "E\u0301", "\u0301", "\u0301\u0301a", "A\u0301B", "AB\u0301", "AB\u0301c", "\u0301ABC", "\u0301ABCd",
    " \u0301", "!\u0301", "!!\u0301x", "\u0301 ", "a\u20dd", "ʰAʰ", "ABʰ", "ABʰC", "A中B", "中A", "ªB", "Bª'd",
    "1", "12", "123", "1234", "1234567", "١٢٣٤", "Ⅷ12", "x123y", " 123", "a1b2",
    "\r\n", "\n", "\r", "\r\r\n\n", " \r\n", "a\r\n", "\r\n  ", " \t\r\n \n  x", "x\r\n\r\n",
    "a ", "a  ", "a   ", "  ", "a \t", " \u3000", "a\u00a0", "x\u00a0y", "\ty", "\u3000Y", "\nX", "\rX",
    "!/", "!\n/\n/x", " !\r\n/", "a/b", "//x", " / ", "(HELLO)", "\"Quote\"", "$HELLO", "$hello", "#Hashtag",
    "😀HELLO", "😀x", "\x00A", "\u200dA", "\ufeffa", "’S", "’s",
]


@pytest.mark.parametrize("text", O200K_EDGES)
def test_o200k_edge_cases(text):
    assert_same_pieces(text, "o200k")
    assert_same_pieces(text + " " + text + "\n" + text.upper() + "\t" + text.lower(), "o200k")


def test_known_pieces():
    assert pretokenize("Hello world's  end\n", "gpt2") == ["Hello", " world", "'s", " ", " end", "\n"]
    assert pretokenize("I'LL 12345 go!\r\n\r\n", "cl100k") == ["I", "'LL", " ", "123", "45", " go", "!\r\n\r\n"]
    assert pretokenize("I'LL go", "gpt2") == ["I", "'", "LL", " go"]
    assert pretokenize("HELLOworld don'T I'LL 12345 ǅemo\r\n/x  ", "o200k") == [
        "HELLOworld", " don'T", " I'LL", " ", "123", "45", " ǅemo", "\r\n", "/x", "  "]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_shakespeare_matches_regex(pattern, shakespeare_text):
    assert_same_pieces(shakespeare_text, pattern)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_stdlib_matches_regex(pattern):
    text = "".join(stdlib_texts(3_000_000))
    assert len(text) >= 3_000_000
    assert_same_pieces(text, pattern)


def test_byte_ends_cover_input():
    data = "héllo wörld 😀  x".encode()
    ends = pretokenize_bytes(data, "gpt2")
    assert ends.dtype == np.int64
    assert ends.tolist() == [1 + 1 + 4, 13, 18, 19, 21]  # "héllo", " wörld", " 😀", " ", " x"


def test_whitespace_table_is_regex_backslash_s():
    classes = code_point_classes()
    spaces = np.flatnonzero(classes & SPACE).tolist()
    assert spaces == WHITE_SPACE
    assert spaces == [c for c in range(0x3001) if regex.match(r"\s", chr(c))]
    assert not classes[0x1C] & SPACE  # str.isspace() says yes; regex's \s says no


def test_letter_number_tables_follow_unicodedata():
    classes = code_point_classes()
    for cp in [0x41, 0xE9, 0x4E2D, 0x10400, 0x20000, 0x30, 0x663, 0x2167, 0xB2, 0x1F600, 0x301, 0x1C5, 0x2B0, 0x903,
               0x20DD, 0x2170]:
        category = unicodedata.category(chr(cp))
        assert bool(classes[cp] & LETTER) == (category[0] == "L")
        assert bool(classes[cp] & NUMBER) == (category[0] == "N")
        assert bool(classes[cp] & UPPER) == (category in ("Lu", "Lt", "Lm", "Lo") or category[0] == "M")
        assert bool(classes[cp] & LOWER) == (category in ("Ll", "Lm", "Lo") or category[0] == "M")


def test_unknown_pattern_and_surrogate():
    with pytest.raises(TokenizerError, match=r"^pattern 'p50k' is unknown \(expected one of: gpt2, cl100k, o200k, llama3, "
                                             r"qwen2, tekken, or a regex; a bare word is taken for a misspelt name\)$"):
        pretokenize("x", "p50k")
    with pytest.raises(TokenizerError, match="^pattern: lookbehind at offset 0 of the regex"):
        pretokenize("x", "(?<=x)y")
    assert pretokenize("ab, cd", r"\p{L}+") == ["ab", ", ", "cd"]  # a regex: its matches and the text between
    with pytest.raises(TokenizerError, match="offset 2: lone surrogate U\\+D800"):
        pretokenize("ab\ud800", "gpt2")


def _matcher_pieces(text: str, pattern: str) -> list[str]:
    """The pieces of ``pattern`` as the compiled regex's own matcher cuts them (never a scanner)."""
    from engine.kernels.pretokenize import pretokenize_ends
    from engine.tokenizers.regex import compile_regex

    data = text.encode("utf-8")
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(len(data), dtype=np.int64)
    count = pretokenize_ends(buf, np.array([0, len(data)], dtype=np.int64), code_point_classes(),
                             compile_regex(pattern).program, out)
    ends = [0, *out[:count].tolist()]
    return [data[a:b].decode("utf-8") for a, b in zip(ends, ends[1:])]


def _assert_scanner_equals_matcher(text):
    from engine.tokenizers.pretokenize import REGEX_NAMES, SCANNER_EQUIVALENTS, pattern_code
    from engine.kernels.pretokenize import CL100K

    llama3 = REGEX_NAMES["llama3"]
    assert SCANNER_EQUIVALENTS[llama3] == "cl100k" and pattern_code(llama3) == CL100K
    got = pretokenize(text, llama3)  # cl100k's scanner
    assert got == _matcher_pieces(text, llama3) == regex.findall(llama3, text), text
    assert got == pretokenize(text, "cl100k")


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(FRAGMENTS + ["\n \n", " \r\n\t", "\n\n  \n x", "'re", "'VE", "x'LL"]), max_size=40))
def test_llama3_regex_cuts_cl100k_pieces_on_fragments(parts):
    """Llama 3's regex runs cl100k's scanner (SCANNER_EQUIVALENTS): its pieces are those its own matcher
    and the regex module cut, on texts made of every class's edge cases."""
    _assert_scanner_equals_matcher("".join(parts))


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=ASSIGNED, max_size=60))
def test_llama3_regex_cuts_cl100k_pieces_on_any_text(text):
    _assert_scanner_equals_matcher(text)


def test_llama3_regex_cuts_cl100k_pieces_on_real_text(shakespeare_text):
    for text in [shakespeare_text[:100_000], *stdlib_texts(300_000)]:
        _assert_scanner_equals_matcher(text)
