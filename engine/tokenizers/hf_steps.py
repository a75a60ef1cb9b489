"""Running the pre-tokenizer steps of a ``tokenizer.json`` pipeline (``hf_components.parse_pre_tokenizer``)
over one normalized part of a text.

The part is UTF-8 bytes cut into contiguous pieces (``engine.kernels.hf_split``). ``scan`` steps cut
every piece with a pattern scanner of ``engine.kernels.pretokenize``; ``split`` steps find a string
or a regex in every piece (after a ``ByteLevel`` step, in the UTF-8 of the pieces' byte characters)
and fold the spans by their behaviour; ``classes`` and ``words`` steps split on character classes;
``bytelevel`` prepends a space to each piece that lacks one (``add_prefix_space``) and marks the
bytes as GPT-2 byte characters for the steps after it; ``metaspace`` replaces spaces and prepends the
replacement (``always``, or ``first``: the piece at the start of the text only), then splits before
each replacement. Steps that remove text gather the kept pieces into a new buffer (``compact``).
``whole_code_points`` gives the code points of the pipelines that keep a part whole (none, or a
Metaspace that does not split), without cutting.
"""

from __future__ import annotations

import numpy as np

from engine.kernels.hf_split import (MERGED_NEXT, byte_chars_utf8, compact, edit_pieces, find_literal,
                                     regex_matches, spaces_replaced, split_classes, split_matches, split_words)
from engine.kernels.pretokenize import pretokenize_ends
from engine.tokenizers.hf_components import WHITE, WORD, byte_flags, char_flags
from engine.tokenizers.pretokenize import pattern_code
from engine.tokenizers.unicode_tables import code_point_classes

__all__ = ["run_steps", "whole_code_points", "replaced_code_points"]


def _starts_with(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, prefix: np.ndarray) -> np.ndarray:
    """bool per piece ``[starts[i], ends[i])``: it begins with the bytes ``prefix``."""
    ok = np.ones(starts.shape[0], dtype=np.bool_)
    for j, b in enumerate(prefix.tolist()):
        pos = starts + j
        inside = pos < ends
        ok &= inside
        ok[inside] &= buf[pos[inside]] == b
    return ok


def whole_code_points(steps: list[tuple], text: str, first: bool) -> np.ndarray | None:
    """The code points (uint32) of the one piece of ``text`` when the pre-tokenizer keeps it whole
    (none, or a Metaspace that does not split); None otherwise."""
    if not steps:
        return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    if len(steps) == 1 and steps[0][0] == "metaspace" and not steps[0][3]:
        _, replacement, scheme, _ = steps[0]
        rep = ord(replacement)
        prepend = (scheme == "always" or scheme == "first" and first) and not text.startswith((" ", replacement))
        return replaced_code_points(text, rep, rep if prepend else -1)
    return None


def replaced_code_points(text: str, replacement: int, prefix: int) -> np.ndarray:
    """The code points (uint32) of ``text`` with its spaces as ``replacement``, after ``prefix`` (-1:
    none): ``hf_split.spaces_replaced`` over the text's UTF-8."""
    return spaces_replaced(np.frombuffer(text.encode("utf-8"), dtype=np.uint8), len(text), replacement, prefix)


def run_steps(steps: list[tuple], text: str, first: bool, mapped_cps: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(buffer, piece ends, mapped)`` of one normalized part after the pre-tokenizer steps."""
    buf = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    ends = np.array([buf.shape[0]], dtype=np.int64)
    mapped, at_zero = False, first
    for step in steps:
        if not ends.shape[0]:
            break
        kind = step[0]
        if kind == "scan":
            bounds = np.zeros(ends.shape[0] + 1, dtype=np.int64)
            bounds[1:] = ends
            out = np.empty(buf.shape[0], dtype=np.int64)
            ends = out[:pretokenize_ends(buf, bounds, code_point_classes(), pattern_code(step[1]), out)]
            continue
        if kind == "bytelevel":
            if step[1]:
                starts = np.concatenate([[0], ends[:-1]])
                flags = buf[starts] != 0x20
                if flags.any():
                    buf, ends = edit_pieces(buf, ends, np.frombuffer(b" ", np.uint8), flags, False,
                                            np.zeros(0, np.uint8))
            mapped = True
            continue
        if kind == "metaspace":
            _, replacement, scheme, split = step
            rep = np.frombuffer(replacement.encode("utf-8"), dtype=np.uint8)
            starts = np.concatenate([[0], ends[:-1]])
            flags = (buf[starts] != 0x20) & ~_starts_with(buf, starts, ends, rep)
            if scheme == "never":
                flags[:] = False
            elif scheme == "first":
                flags[1:] = False
                flags[0] &= at_zero
            buf, ends = edit_pieces(buf, ends, rep, flags, True, rep)
            if split:
                starts, ends, n = split_classes(buf, ends, char_flags(), byte_flags(), False, 0, ord(replacement),
                                                MERGED_NEXT, False)
                ends = ends[:n]
            continue
        if kind == "split":
            _, pattern, behavior, invert = step
            ms, me, mp = _matches(pattern, buf, ends, mapped, mapped_cps)
            starts, new_ends, n = split_matches(ends, ms, me, mp, ms.shape[0], behavior, invert)
        elif kind == "classes":
            _, mask, target, behavior = step
            starts, new_ends, n = split_classes(buf, ends, char_flags(), byte_flags(), mapped, mask, target,
                                                behavior, False)
        else:  # words
            starts, new_ends, n = split_words(buf, ends, char_flags(), byte_flags(), mapped, WORD, WHITE)
        starts, new_ends = starts[:n], new_ends[:n]
        at_zero = at_zero and n > 0 and starts[0] == 0
        if n and (starts[0] != 0 or new_ends[-1] != buf.shape[0] or (starts[1:] != new_ends[:-1]).any()):
            buf, new_ends = compact(buf, starts, new_ends, n)
        elif not n:
            buf = buf[:0]
        ends = new_ends
    return buf, ends, mapped


def _matches(pattern, buf: np.ndarray, ends: np.ndarray, mapped: bool, mapped_cps: np.ndarray):
    """``(starts, ends, piece)`` of the pattern's matches in every piece (absolute byte offsets)."""
    kind, value = pattern
    if mapped:  # the pieces as GPT-2 byte characters, in UTF-8; spans back to offsets in buf
        text, text_ends, back = byte_chars_utf8(buf, ends, mapped_cps)
        s, e, p = _matches(pattern, text, text_ends, False, mapped_cps)
        return back[s], back[e], p
    if kind == "string":
        s, e, p, n = find_literal(buf, ends, np.frombuffer(value, dtype=np.uint8))
        return s[:n], e[:n], p[:n]
    s, e, p, _ = regex_matches(buf, ends, value.program)
    return s, e, p
