"""Write engine/tokenizers/hf_unicode.py: the character data of Hugging Face ``tokenizers``' components.

Hugging Face's components do not share one Unicode: ``Digits`` asks Rust's ``char::is_numeric``,
``Lowercase`` Rust's ``char::to_lowercase`` (both the Unicode of the Rust that built the wheel),
``Punctuation`` an older punctuation table, ``Whitespace`` and ``single_word`` the Rust ``regex``
crate's ``\\w``, and ``NFC``/``NFD``/``NFKC``/``NFKD`` a normalization table older than Python's own
``unicodedata``. So each set is asked of ``tokenizers`` itself, over every code point, and
committed; ``tests/test_unicode_version.py`` asks again and fails when a new ``tokenizers`` moves.

- ``DIGIT_RANGES``: what ``Digits(individual_digits=True)`` isolates;
- ``PUNCTUATION_RANGES``: what ``Punctuation()`` isolates;
- ``WORD_RANGES``: what ``Whitespace()`` keeps inside a word (``\\w``);
- ``LOWERCASE``: ``(code point, its lower case)`` for each character ``Lowercase()`` changes;
- ``NORMALIZATION_OPAQUE_RANGES``: code points Unicode 16.0 (``unicodedata2``) gives a
  decomposition, a combining class or a composition and Hugging Face's normalizers leave as
  they are (they are newer than its table): ``hf_components`` keeps them out of Python's
  ``unicodedata.normalize``, which knows them.

    pip install unicodedata2==16.0.0   # only to regenerate
    python scripts/make_hf_unicode.py
"""

import argparse
import sys
from pathlib import Path

import tokenizers
from tokenizers import normalizers, pre_tokenizers
from unicode_source import UNICODE_VERSION, categories, runs

OUT = Path(__file__).resolve().parent.parent / "engine" / "tokenizers" / "hf_unicode.py"
CODE_POINTS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and cp != 0x20]


def _pieces(pre_tokenizer, start_at: int, length: int) -> list[bool]:
    """Code points ``c`` for which the pre-tokenizer gives a piece of ``length`` characters starting
    ``start_at`` characters into ``"a" + c + "a"``."""
    text = " ".join("a" + chr(cp) + "a" for cp in CODE_POINTS)
    flags = [False] * 0x110000
    for _, (start, end) in pre_tokenizer.pre_tokenize_str(text):
        if start % 4 == start_at and end - start == length:
            flags[CODE_POINTS[start // 4]] = True
    return flags


def isolated(pre_tokenizer) -> list[bool]:
    """Code points ``c`` that the pre-tokenizer cuts out of ``"a" + c + "a"`` as a piece of their own."""
    return _pieces(pre_tokenizer, 1, 1)


def inside_word(pre_tokenizer) -> list[bool]:
    """Code points ``c`` for which ``"a" + c + "a"`` stays one piece."""
    return _pieces(pre_tokenizer, 0, 3)


def lowercase() -> list[tuple[int, str]]:
    points = [cp for cp in CODE_POINTS if cp != 0x0A]
    lowered = normalizers.Lowercase().normalize_str("\n".join(map(chr, points))).split("\n")
    if len(lowered) != len(points):
        raise SystemExit("Lowercase() changed the number of lines: cannot read its table")
    return [(cp, low) for cp, low in zip(points, lowered) if low != chr(cp)]


def opaque(cats: list[str]) -> list[bool]:
    """Code points with normalization data in Unicode 16.0 that Hugging Face's normalizers ignore."""
    import unicodedata2 as u

    forms = {name: getattr(normalizers, name)() for name in ("NFC", "NFD", "NFKC", "NFKD")}
    flags = [False] * 0x110000
    for cp in CODE_POINTS:
        ch = chr(cp)
        if cats[cp] == "Cn":
            continue
        if u.decomposition(ch) and any(forms[f].normalize_str(ch) != u.normalize(f, ch) for f in forms):
            flags[cp] = True
        klass = u.combining(ch)
        if klass:  # a mark it knows moves past one of another class; one it does not know stays
            probe = "a" + ch + "\u0334" if klass > 1 else "a\u0301" + ch
            if forms["NFD"].normalize_str(probe) != u.normalize("NFD", probe):
                flags[cp] = True
    known = set()  # characters it demonstrably knows: a mark it reorders, a part of a composition it makes
    failed = []
    for cp in CODE_POINTS:
        ch = chr(cp)
        if u.combining(ch) and not flags[cp]:
            known.add(cp)
        parts = u.normalize("NFD", ch)
        if len(parts) == 2 and u.normalize("NFC", parts) == ch:
            if forms["NFC"].normalize_str(parts) == ch:
                known.update(map(ord, parts))
            else:
                failed.append((cp, parts))
    for cp, parts in failed:  # a composition it does not make: the composite and each part it does not know
        flags[cp] = True
        for c in map(ord, parts):
            flags[c] = flags[c] or c not in known
    return flags


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + " Takes no arguments.",
                            epilog="example: python scripts/make_hf_unicode.py").parse_args()
    cats = categories()
    digits = runs(isolated(pre_tokenizers.Digits(individual_digits=True)))
    punctuation = runs(isolated(pre_tokenizers.Punctuation()))
    word = runs(inside_word(pre_tokenizers.Whitespace()))
    lower = lowercase()
    hidden = runs(opaque(cats))

    def table(name: str, items: list[tuple[int, int]]) -> str:
        return f"{name} = (\n" + "".join(f"    (0x{a:04X}, 0x{b:04X}),\n" for a, b in items) + ")\n"

    OUT.write_text(
        '"""Character data of Hugging Face ``tokenizers``\' components, asked of the library itself.\n\n'
        "DIGIT_RANGES: what ``Digits`` isolates; PUNCTUATION_RANGES: what ``Punctuation`` isolates;\n"
        "WORD_RANGES: ``\\\\w`` of ``Whitespace`` and ``single_word``; LOWERCASE: ``(code point, lower case)``\n"
        "for each character ``Lowercase`` changes; NORMALIZATION_OPAQUE_RANGES: code points with Unicode\n"
        "16.0 normalization data that its NFC/NFD/NFKC/NFKD leave as they are.\n\n"
        f"Generated by scripts/make_hf_unicode.py from tokenizers {tokenizers.__version__} and unicodedata2 "
        f"{UNICODE_VERSION}; do not edit.\n"
        '"""\n\n'
        f'TOKENIZERS_VERSION = "{tokenizers.__version__}"\n\n'
        + table("DIGIT_RANGES", digits) + "\n" + table("PUNCTUATION_RANGES", punctuation) + "\n"
        + table("WORD_RANGES", word) + "\n"
        + "LOWERCASE = (\n" + "".join(f"    (0x{cp:04X}, {low!r}),\n" for cp, low in lower) + ")\n\n"
        + table("NORMALIZATION_OPAQUE_RANGES", hidden),
        encoding="utf-8",
    )
    print(f"wrote {OUT.relative_to(OUT.parents[2])}: {len(digits)} digit, {len(punctuation)} punctuation, "
          f"{len(word)} word ranges, {len(lower)} lower cases, {len(hidden)} opaque ranges "
          f"(tokenizers {tokenizers.__version__})", file=sys.stdout)


if __name__ == "__main__":
    main()
