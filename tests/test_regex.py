"""engine.tokenizers.regex and engine.kernels.regex_vm: every construct against the ``regex`` module
(``find_spans`` is ``finditer``), the kernel against its plain-Python twin (tests/naive_regex.py),
piece ends against Hugging Face's ``Split`` (Oniguruma), the real tokenizers' patterns, the named
patterns' hand-written scanners, refused constructs, long inputs and pickling."""

import pickle

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import TokenizerError
from engine.kernels.regex_vm import find_piece_matches, regex_final_piece_ends, regex_pretokenize_ends
from engine.tokenizers.pretokenize import PATTERNS, TIKTOKEN_SPELLINGS, canonical_pattern, pretokenize_bytes
from engine.tokenizers.regex import compile_regex
from tests.naive_regex import naive_find_spans, naive_onig_spans, naive_piece_ends, naive_piece_matches
from tests.helpers import newer_than_tables

hf_tokenizers = pytest.importorskip("tokenizers", reason="needs the test extra (pip install -e '.[test]')")

LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
          r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"""
         r"""|\s+(?!\S)|\s+""")
TEKKEN = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"""
          r"""[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+"""
          r"""|\s+(?!\S)|\s+""")
DEEPSEEK_LETTERS = (  # as DeepSeek's tokenizer.json has them (escapes where NFC would change a character)
    "A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u1f7dᾀ-ᾴᾶ-ᾼ"
    "\u1fbeῂ-ῄῆ-ῌῐ-\u1fd3ῖ-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212a-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎ"
    "ꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃")
DEEPSEEK = [r"[\r\n]", r"\s?[" + DEEPSEEK_LETTERS + r"]+", r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$",
            r"[一-龥ࠀ-一가-퟿]+", r"\p{N}+"]
REAL = {"gpt2": PATTERNS["gpt2"], "cl100k": PATTERNS["cl100k"], "o200k": PATTERNS["o200k"], "llama3": LLAMA3,
        "qwen2": QWEN2, "tekken": TEKKEN, **{f"deepseek{k}": p for k, p in enumerate(DEEPSEEK)}}

# Letters of several scripts and cases (ſ and K fold to s and k), a title-case and a modifier letter,
# marks, digits of several kinds, CJK and kana, whitespace of every sort, apostrophes, punctuation, emoji.
TRICKY = ("aAbBcCsSkKlLrRtTvVdDmMeE ſKéÉñ" "ΩωДд" "ǅʰ" "\u0301\u0308" "019٣Ⅷ" "漢字龥ひらカタ한글" " \t\r\n\u00a0\u3000\u2028"
          "'’" ".,!?-_/()$#@" "😀👍" "µ")
# What Oniguruma's older Unicode tables and \w also agree on (² and ZWJ differ in \w, see the module).
TEXTS = st.text(alphabet=TRICKY, max_size=24)
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# (ours, the regex module's spelling): each construct the compiler takes.
CONSTRUCTS = [
    "a|b|ab", "(a|ab)(c|bcd)", "(?:ab)+", "(?i:AbC)", "(?i)s", "(?i:[a-c])+", "(?i)k", "[^a-c\\s]+", "[a-zà-ö]+",
    "[一-龥]+", "[\\p{L}\\d]+", "[^\\p{L}\\p{N}]+", "\\s+", "\\S+", "\\d+", "\\D", "\\w+", "\\W+", "\\r\\n|\\n|\\t",
    "\\u00e9|\\x41", "\\p{Lu}+", "\\p{Ll}+", "\\p{Lt}", "\\p{Lm}", "\\p{Lo}+", "\\p{M}+", "\\p{N}+", "\\p{Nd}+",
    "\\p{P}+", "\\p{S}+", "\\p{Z}+", "\\P{L}+", "\\p{^L}+", "[^\\P{L}a]+", "\\p{Han}+", "\\p{Hiragana}+",
    "\\p{Katakana}+", "\\p{Hangul}+", "\\p{Latin}+", "\\p{Greek}|\\p{Cyrillic}", "a*", "a+?", "a??b", "a{2}",
    "a{2,}", "(?i)ab|c", "x|(?i)ab|c",
    "a{1,3}", "a{,2}b", "(?:ab){1,2}?", "(?:ab){2,}", "a*?b", "a?+a", "a++", "a*+b", "(?>a|ab)c",
    "(?>ab|a)c", "a(?=b)", "a(?!b)", "\\w+(?=\\s)", "(?=a)\\w+", "^a", "a$", "^\\s+|\\s+$", "\\Aa", "\\b\\w+\\b",
    "\\B\\w", ".+", ".", "x*|ab", "(?:a|b)*c", "(a)|b", "(?<name>a+)b", "(?P<x>a)", "[\\]a-]+", "\\.\\+\\*",
    "{", "a{x}",
    ("a\\z", "a\\Z"), ("\\x{1F600}+", "\\U0001F600+"), ("\\x{e9}", "\\xe9"),
]


def byte_offsets(text: str) -> np.ndarray:
    """UTF-8 byte offset of each character offset of ``text`` (len(text) + 1 entries)."""
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    widths = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    return np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)


def byte_spans(pattern: str, text: str, oniguruma: bool = False) -> list[tuple[int, int]]:
    """``regex.finditer`` spans in UTF-8 bytes, ``^``/``$`` as tiktoken means them (compile_regex's
    default dialect): the text's start and end (``$`` written ``\\Z``: not before a final newline);
    ``oniguruma``: a line's (MULTILINE)."""
    at = byte_offsets(text).tolist()
    found = (regex.finditer(pattern, text, flags=regex.MULTILINE) if oniguruma
             else regex.finditer(pattern.replace("$", r"\Z"), text))
    return [(at[m.start()], at[m.end()]) for m in found]


def kernel_ends(rx, data: bytes) -> list[int]:
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(len(data), dtype=np.int64)
    return out[:regex_pretokenize_ends(buf, 0, len(data), rx.program, out)].tolist()


def onig_ends(pattern: str, text: str) -> list[int]:
    """Piece ends (UTF-8 bytes) of Hugging Face's Split(Regex, Isolated), i.e. Oniguruma."""
    split = hf_tokenizers.pre_tokenizers.Split(hf_tokenizers.Regex(pattern), "isolated")
    ends, at = [], 0
    for piece, _ in split.pre_tokenize_str(text):
        at += len(piece.encode())
        ends.append(at)
    return ends


def regex_ends(pattern: str, text: str, oniguruma: bool = False) -> list[int]:
    """Ends of the matches and the text between them, by the regex module (for patterns without empty matches)."""
    ends, prev = [], 0
    for s, e in byte_spans(pattern, text, oniguruma):
        if s > prev:
            ends.append(s)
        ends.append(e)
        prev = e
    if prev < len(text.encode()):
        ends.append(len(text.encode()))
    return ends


@pytest.mark.parametrize("construct", CONSTRUCTS, ids=lambda c: c if isinstance(c, str) else c[0])
@SLOW
@given(text=TEXTS)
def test_construct_equals_regex_module_and_twin(construct, text):
    ours, theirs = construct if isinstance(construct, tuple) else (construct, construct)
    rx = compile_regex(ours)
    data = text.encode()
    want = byte_spans(theirs, text)
    assert [tuple(s) for s in rx.find_spans(data).tolist()] == want
    assert naive_find_spans(rx.program, data) == want
    assert kernel_ends(rx, data) == naive_piece_ends(rx.program, data)
    onig = [tuple(s) for s in rx.find_spans(data, iteration="oniguruma").tolist()]
    assert onig == naive_onig_spans(rx.program, data)
    if not any(s == e for s, e in want):  # without empty matches both iterations agree
        assert onig == want


# Oniguruma takes these as the regex module does; \w and \b are left out (they differ, see the module).
ONIG_CONSTRUCTS = [c for c in CONSTRUCTS if isinstance(c, str) and "\\w" not in c and "\\b" not in c and "\\B" not in c
                   and c not in ("{", "a{x}", "(?P<x>a)")]


@pytest.mark.parametrize("construct", ONIG_CONSTRUCTS)
@SLOW
@given(text=TEXTS)
def test_piece_ends_equal_hugging_face_split(construct, text):
    assert kernel_ends(compile_regex(construct, dialect="oniguruma"), text.encode()) == onig_ends(construct, text)


def test_empty_matches_finditer_and_oniguruma_differ_as_documented():
    rx = compile_regex("x*|ab")
    assert rx.find_spans(b"ab").tolist() == [[0, 0], [0, 2], [2, 2]]  # regex: then a non-empty match at 0
    assert kernel_ends(rx, b"ab") == [1, 2] == onig_ends("x*|ab", "ab")  # Oniguruma: skips one character
    assert compile_regex("(?:)|x").find_spans(b"xx").tolist() == [[0, 0], [0, 1], [1, 1], [1, 2], [2, 2]]
    assert rx.find_spans(b"ab", iteration="oniguruma").tolist() == [[0, 0], [1, 1], [2, 2]]
    with pytest.raises(TokenizerError, match="iteration='pcre'"):
        rx.find_spans(b"ab", iteration="pcre")


@pytest.mark.parametrize("name", list(REAL))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet=TRICKY, max_size=60))
def test_real_patterns_equal_regex_oniguruma_and_twin(name, text):
    pattern = REAL[name]
    data = text.encode()
    rx = compile_regex(pattern)  # as a tiktoken file's regex
    ends = kernel_ends(rx, data)
    assert ends == regex_ends(pattern, text) == naive_piece_ends(rx.program, data)
    rx = compile_regex(pattern, dialect="oniguruma")  # as a tokenizer.json's
    ends = kernel_ends(rx, data)
    assert ends == regex_ends(pattern, text, oniguruma=True) == naive_piece_ends(rx.program, data)
    assert ends == onig_ends(pattern, text)


@pytest.mark.parametrize("name", list(REAL))
def test_no_jump_leads_to_match(name):
    """A jump whose target is MATCH (an alternative's end) is compiled as that MATCH; the programs above
    match as the regex module does with it."""
    from engine.kernels.regex_vm import JMP, MATCH

    code = compile_regex(REAL[name]).program.code
    jumps = [row for row in code if row[0] == JMP]
    assert all(code[row[1], 0] != MATCH for row in jumps)
    if name in ("gpt2", "cl100k", "o200k", "llama3", "qwen2"):  # top-level alternatives: each ends in a MATCH
        assert (code[:, 0] == MATCH).sum() >= 2


SAMPLES = ["Hello world's  THEY'RE don'T I'M\n\n 123456 漢字かなカナ한국어 ñandú!!  \r\n x",
           "HELLOworld helloWORLD ǅemo ǄEMO e\u0301\u0301 E\u0301X 1 12 123 1234 ١٢٣٤ Ⅷ12 a\r\n\r\n  b \r\n\n\t x  ",
           "!/ !\n/\n/x a/b //x (HELLO) $HELLO 😀HELLO ’S ’s trailing   ", "ſ'ſ 'S 'ſ", " " * 50 + "x" + "\n" * 5]


@pytest.mark.parametrize("name", list(REAL))
def test_real_patterns_on_corpora(name, shakespeare_text):
    from tests.naive_byte_bpe import stdlib_texts

    pattern = REAL[name]
    text = shakespeare_text[:100_000] + "".join(SAMPLES) + "".join(stdlib_texts(300_000))
    ends = kernel_ends(compile_regex(pattern), text.encode())  # as a tiktoken file's regex
    assert ends == regex_ends(pattern, text)
    ends = kernel_ends(compile_regex(pattern, dialect="oniguruma"), text.encode())  # as a tokenizer.json's
    assert ends == regex_ends(pattern, text, oniguruma=True) == onig_ends(pattern, text)


@pytest.mark.parametrize("name", list(REAL))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet=TRICKY, max_size=40), more=st.text(alphabet=TRICKY, max_size=20))
def test_final_piece_ends_hold_for_any_continuation(name, text, more):
    rx = compile_regex(REAL[name])
    data = text.encode()
    out = np.empty(len(data), dtype=np.int64)
    count, final = regex_final_piece_ends(np.frombuffer(data, dtype=np.uint8), len(data), rx.program, out)
    assert out[:count].tolist() == kernel_ends(rx, data) and 0 <= final <= count
    assert out[:final].tolist() == kernel_ends(rx, (text + more).encode())[:final]
    if final:
        assert out[final - 1] < len(data)


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "o200k"])
@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=TRICKY, max_size=80))
def test_named_patterns_compiled_equal_their_scanners(name, text):
    data = text.encode()
    assert kernel_ends(compile_regex(PATTERNS[name]), data) == pretokenize_bytes(data, name).tolist()


def test_named_patterns_on_corpora_equal_their_scanners(shakespeare_text):
    text = (shakespeare_text[:200_000] + "".join(SAMPLES)).encode()
    for name in ("gpt2", "cl100k", "o200k"):
        assert kernel_ends(compile_regex(PATTERNS[name]), text) == pretokenize_bytes(text, name).tolist(), name


def test_spellings_of_named_patterns_take_the_fast_path():
    assert canonical_pattern(PATTERNS["cl100k"]) == "cl100k" and canonical_pattern("o200k") == "o200k"
    for spelling, name in TIKTOKEN_SPELLINGS.items():
        assert canonical_pattern(spelling) == name
        text = "".join(SAMPLES) + "don't  x\n\n y   "
        assert regex.findall(spelling, text) == regex.findall(PATTERNS[name], text)
    assert canonical_pattern(LLAMA3) == LLAMA3


@pytest.mark.parametrize("pattern, fragment", [
    ("(?<=a)b", "lookbehind at offset 0"),
    ("(?<!a)b", "lookbehind at offset 0"),
    ("(a)\\1", "a backreference at offset 3"),
    ("\\k<x>", "named backreference"),
    ("(?m)a", "inline flags (?m) at offset 0"),
    ("ab(?i)c|d", "an inline flag group (?i) after the start of a branch (use (?i:...)) at offset 2"),
    ("(?s:a)", "the inline flags (?s: at offset 0"),
    ("a\\Z", "\\Z (end or before a final newline) at offset 1"),
    ("\\Ga", "\\G at offset 0"),
    ("[[:alpha:]]", "a POSIX bracket [:name:] at offset 1"),
    ("[a[b]]", "a nested class at offset 2"),
    ("[a&&b]", "a class intersection && at offset 2"),
    ("a{1,2}+", "'+' after a {m,n} quantifier"),
    ("(?:)*", "a quantifier on an empty group at offset 4"),
    ("(?:a?)*", "an unbounded repetition of a group that can match the empty string at offset 0"),
    ("(a*)+", "an unbounded repetition of a group that can match the empty string"),
    ("\\p{Klingon}", "the unknown or unsupported property or script 'Klingon' at offset 0"),
    ("\\pL", "a one-letter property without braces"),
    ("(?i)ß", "case-insensitive 'ß'"),
    ("(?i:ss)", "case-insensitive 'ss', which full case folding matches as one character"),
    ("(?i:[ßa])", "a case-insensitive class holding 'ß'"),
    ("\\h", "\\h (a hex digit in Oniguruma) at offset 0"),
    ("\\R", "\\R at offset 0"),
    ("\\X", "\\X at offset 0"),
    ("\\K", "\\K at offset 0"),
    ("\\q", "the escape \\q at offset 0"),
    ("(a", "an unterminated group '(' at offset 0"),
    ("a)", "unbalanced ')' at offset 1"),
    ("[a", "an unterminated class '[' at offset 0"),
    ("*a", "quantifier '*' with nothing to repeat at offset 0"),
    ("a**", "a quantifier after a quantifier at offset 2"),
    ("a{3,1}", "the quantifier '{3,1}' (max below min) at offset 1"),
    ("(?=a)*", "a quantifier on an assertion"),
    ("[z-a]", "the empty range 'z'-'a' at offset 1"),
    ("\\x{110000}", "not a Unicode scalar value"),
    ("\\u12", "a malformed hexadecimal escape"),
    ("(?#c)", "the group syntax '(?#' at offset 0"),
    ("a\\", "a trailing backslash at offset 1"),
    ("a{,}", "the quantifier {,} (a repetition in the regex module, literal text in Oniguruma) at offset 1"),
])
def test_unsupported_constructs_are_named(pattern, fragment):
    with pytest.raises(TokenizerError) as info:
        compile_regex(pattern, source="tokenizer.json pre_tokenizer")
    message = str(info.value)
    assert message.startswith("tokenizer.json pre_tokenizer: ") and fragment in message, message
    assert repr(pattern) in message


@pytest.mark.parametrize("prop", ["L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "N", "Nd", "Nl", "No", "P", "Pd", "S",
                                  "Sm", "Z", "Zs", "Cc", "Han", "Hiragana", "Katakana", "Hangul", "Latin", "Arabic",
                                  "Common", "Letter", "Uppercase_Letter", "gc=Lu", "sc=Greek"])
def test_property_classes_equal_regex_module_on_every_code_point(prop):
    """Each class holds exactly the code points the regex module's does (one match per code point),
    but for those the regex module's newer Unicode assigns (``newer_than_tables``)."""
    text = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    data = text.encode()
    spans = compile_regex("\\p{%s}" % prop).find_spans(data)
    newer = newer_than_tables()
    ours = {ord(data[s:e].decode()) for s, e in spans.tolist()} - newer
    theirs = {ord(m.group()) for m in regex.finditer("\\p{%s}" % prop, text)} - newer
    assert ours == theirs


def test_escape_classes_and_case_folding_equal_regex_module_on_every_code_point():
    text = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    data = text.encode()
    newer = newer_than_tables() | {0x130, 0x131}  # the regex module's Turkic (?i) pairs are not the references'
    for pattern in ("\\s", "\\d", "\\w", "\\S", ".", "(?i:[a-z])", "(?i)k", "(?i:\\u00e5)", "(?i:[α-ω])"):
        ours = {ord(data[s:e].decode()) for s, e in compile_regex(pattern).find_spans(data).tolist()}
        assert ours - newer == {ord(m.group()) for m in regex.finditer(pattern, text)} - newer, pattern


def test_oniguruma_word_class_differs_only_as_documented():
    # \w: Oniguruma counts the Latin-1 numbers (²) as words and joiners (ZWJ) not; the regex module the
    # reverse; dialect="oniguruma" (a tokenizer.json regex) takes Oniguruma's, \b with it.
    assert compile_regex("\\w+").find_spans("a\u200d²".encode()).tolist() == [[0, 4]]
    assert onig_ends("\\w+", "a\u200d²") == [1, 4, 6]
    onig = compile_regex("\\w+", dialect="oniguruma")
    assert onig.find_spans("a\u200d²".encode(), iteration="oniguruma").tolist() == [[0, 1], [4, 6]]
    assert compile_regex("\\b²", dialect="oniguruma").find_spans(" ²".encode()).tolist() == [[1, 3]]
    assert compile_regex("\\b²").find_spans(" ²".encode()).tolist() == []
    assert onig != compile_regex("\\w+") and onig == compile_regex("\\w+", dialect="oniguruma")
    import pickle
    assert pickle.loads(pickle.dumps(onig)) == onig
    with pytest.raises(TokenizerError, match="dialect 'pcre'"):
        compile_regex("a", dialect="pcre")


@pytest.mark.parametrize("pattern, text, ends", [
    (LLAMA3, "a" * 1_000_000, [1_000_000]),
    (LLAMA3, " " * 1_000_000, [1_000_000]),
    (LLAMA3, " " * 1_000_000 + "x", [999_999, 1_000_001]),
    (PATTERNS["o200k"], "漢" * 1_000_000, [3_000_000]),
    (TEKKEN, "A" * 1_000_000, [1_000_000]),
    (r"\s+$", " " * 1_000_000 + "x", [1_000_001]),  # no match: each start fails at once after the first
    (r"\s*[\r\n]+|\s+", " " * 1_000_000 + "x", [1_000_000, 1_000_001]),
    (DEEPSEEK[4], "漢" * 1_000_000, [3_000_000]),
])
def test_long_runs_stay_linear(pattern, text, ends):
    """A backtracking matcher without the failure memo takes quadratic time on these (hours)."""
    assert kernel_ends(compile_regex(pattern), text.encode()) == ends


def test_deep_backtracking_grows_the_stack():
    rx = compile_regex("(?:a|b)*c")
    text = "ab" * 5000 + "c"
    assert rx.find_spans(text.encode()).tolist() == [[0, 10001]]
    assert kernel_ends(rx, ("ab" * 5000).encode()) == [10000]


def piece_matches(rx, pieces: list[bytes], oniguruma: bool) -> list[tuple[int, int, int]]:
    """``find_piece_matches`` over the pieces laid end to end: ``(start, end, piece)``, offsets in the piece."""
    data = b"".join(pieces)
    ends = np.cumsum([len(p) for p in pieces]).astype(np.int64)
    out = np.empty((2 * len(data) + 2 * len(pieces) + 2, 2), dtype=np.int64)
    where = np.empty(out.shape[0], dtype=np.int64)
    n = find_piece_matches(np.frombuffer(data, dtype=np.uint8), 0, ends, rx.program, out, where, oniguruma)
    starts = [0, *ends.tolist()]
    return [(s - starts[p], e - starts[p], p) for (s, e), p in zip(out[:n].tolist(), where[:n].tolist())]


@pytest.mark.parametrize("pattern", [c if isinstance(c, str) else c[0] for c in CONSTRUCTS] + list(REAL.values()))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.text(alphabet=TRICKY, max_size=12), max_size=6))
def test_piece_matches_in_one_pass_equal_each_piece_alone(pattern, pieces):
    """One pass over many pieces (Split's kernel) gives each piece's matches as if it were the whole text:
    anchors, lookahead and the failure memo stop at its ends."""
    rx = compile_regex(pattern)
    data = [p.encode() for p in pieces]
    for oniguruma in (True, False):
        assert piece_matches(rx, data, oniguruma) == naive_piece_matches(rx.program, data, oniguruma)


def test_piece_matches_grow_the_stack_in_a_later_piece():
    """The stack overflows in the third piece right after an empty match, and again in the fourth: the
    search goes on in that piece, with Oniguruma's rule for an empty match where the last one ended."""
    rx = compile_regex("(?:a|b)*c|d*")
    pieces = [b"abc", b"xab", b"x" + b"ab" * 3000 + b"c", b"dd" + b"ab" * 12000 + b"c"]
    short = naive_piece_matches(rx.program, pieces[:2], True)
    assert piece_matches(rx, pieces, True) == short + [(0, 0, 2), (1, 6002, 2), (0, 2, 3), (2, 24003, 3)]
    short = naive_piece_matches(rx.program, pieces[:2], False)
    assert piece_matches(rx, pieces, False) == short + [(0, 0, 2), (1, 6002, 2), (6002, 6002, 2), (0, 2, 3),
                                                       (2, 24003, 3), (24003, 24003, 3)]
    assert rx.find_spans(pieces[2], iteration="oniguruma").tolist() == [[0, 0], [1, 6002]]


def test_regex_objects_pickle():
    rx = compile_regex(LLAMA3, source="tokenizer.json")
    again = pickle.loads(pickle.dumps(rx))
    assert again.pattern == LLAMA3 and again == rx
    data = "".join(SAMPLES).encode()
    assert np.array_equal(again.find_spans(data), rx.find_spans(data))


def test_find_spans_input_checks():
    rx = compile_regex("a")
    assert rx.find_spans(np.frombuffer(b"bab", dtype=np.uint8)).tolist() == [[1, 2]]
    with pytest.raises(TokenizerError, match="not valid UTF-8 at byte 1"):
        rx.find_spans(b"a\xff")
    with pytest.raises(TokenizerError, match="expected bytes or a 1-d uint8 array"):
        rx.find_spans("a")
