"""UTF-8 sizes of texts without encoding a long one whole (a leaf: the store, the corpus readers and
the tokenizers all count bytes this way)."""

from __future__ import annotations

__all__ = ["TEXT_SLICE", "utf8_length"]

# Long texts are encoded to UTF-8 this many characters at a time (no copy of a whole long document).
TEXT_SLICE = 1 << 20


def utf8_length(text) -> int:
    """Bytes of ``text`` in UTF-8 (lone surrogates as three bytes each), without encoding it whole.
    A text left in its file (``engine.corpus.long_lines.LongText``) knows its size."""
    if not isinstance(text, str):
        return text.utf8_bytes
    if text.isascii():
        return len(text)
    return sum(len(text[i:i + TEXT_SLICE].encode("utf-8", "surrogatepass")) for i in range(0, len(text), TEXT_SLICE))
