"""Plain-loop twin of engine.kernels.spm_normalize and engine.kernels.spm_bpe: SentencePiece BPE
written as its C++ reads, on Python strings and bytes, without tables, chunks or caches.

``naive_normalize`` follows ``Normalizer::Normalize`` / ``NormalizePrefix`` (the Darts double
array walked unit by unit); ``naive_encode`` follows ``bpe::Model::Encode`` (every step scans all
adjacent pairs for the highest score, leftmost on ties) and ``PopulateSentencePieceText`` (byte
fallback, runs of unknown pieces made one).
"""

from __future__ import annotations

import struct

from engine.tokenizers.spm_model import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED, SpmModel

SPACE = "\u2581"


def _units(blob: bytes) -> tuple[list[int], bytes]:
    size = struct.unpack("<I", blob[:4])[0]
    units = list(struct.unpack(f"<{size // 4}I", blob[4:4 + size]))
    return units, blob[4 + size:]


def _common_prefix_longest(units: list[int], data: bytes, pos: int) -> tuple[int, int]:
    """Darts-clone commonPrefixSearch from ``pos``: the longest of the first 32 results."""
    node = 0
    unit = units[0]
    node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
    results = []
    for i in range(pos, len(data)):
        c = data[i]
        node ^= c
        if node >= len(units):
            break
        unit = units[node]
        if unit & ((1 << 31) | 0xFF) != c:
            break
        node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
        if (unit >> 8) & 1:
            results.append((i - pos + 1, units[node] & ((1 << 31) - 1)))
    best = (0, 0)
    for length, value in results[:32]:
        if best[0] == 0 or length > best[0]:
            best = (length, value)
    return best


def _user_defined(model: SpmModel) -> list[bytes]:
    return [p.piece.encode("utf-8") for p in model.pieces if p.type == USER_DEFINED]


def _longest_user(users: list[bytes], data: bytes, pos: int) -> int:
    return max((len(u) for u in users if data.startswith(u, pos)), default=0)


def _char_len(lead: int) -> int:
    return 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def _normalize_prefix(model, units, repl, users, data, pos) -> tuple[bytes, int]:
    n = _longest_user(users, data, pos)
    if n:
        return data[pos:pos + n], n
    if units:
        length, value = _common_prefix_longest(units, data, pos)
        if length:
            end = repl.index(b"\0", value) if b"\0" in repl[value:] else len(repl)
            return repl[value:end], length
    n = min(_char_len(data[pos]), len(data) - pos)
    return data[pos:pos + n], n


def naive_normalize(model: SpmModel, text: str) -> str:
    data = text.encode("utf-8")
    units, repl = _units(model.precompiled_charsmap) if model.precompiled_charsmap else ([], b"")
    users = _user_defined(model)
    space = SPACE.encode() if model.escape_whitespaces else b" "
    pos = 0
    if model.remove_extra_whitespaces:
        while pos < len(data):
            sp, consumed = _normalize_prefix(model, units, repl, users, data, pos)
            if sp != b" ":
                break
            pos += consumed
    if pos >= len(data):
        return ""
    out = bytearray()
    if not model.treat_whitespace_as_suffix and model.add_dummy_prefix:
        out += space
    prev_space = model.remove_extra_whitespaces
    while pos < len(data):
        sp, consumed = _normalize_prefix(model, units, repl, users, data, pos)
        if prev_space:
            sp = sp.lstrip(b" ")
        if sp:
            for b in sp:
                out += space if (model.escape_whitespaces and b == 0x20) else bytes([b])
            prev_space = sp.endswith(b" ")
        pos += consumed
        if not model.remove_extra_whitespaces:
            prev_space = False
    if model.remove_extra_whitespaces:
        while out.endswith(space):
            del out[-len(space):]
    if model.treat_whitespace_as_suffix and model.add_dummy_prefix:
        out += space
    return out.decode("utf-8")


def naive_encode(model: SpmModel, text: str) -> list[int]:
    normalized = naive_normalize(model, text)
    pieces = {p.piece: i for i, p in enumerate(model.pieces) if p.type in (NORMAL, USER_DEFINED)}
    reserved = {p.piece: i for i, p in enumerate(model.pieces) if p.type in (CONTROL, UNKNOWN, BYTE)}
    unk = next(i for i, p in enumerate(model.pieces) if p.type == UNKNOWN)
    users = sorted((p.piece for p in model.pieces if p.type == USER_DEFINED), key=len, reverse=True)

    def piece_to_id(s: str) -> int:
        return reserved.get(s, pieces.get(s, unk))

    symbols: list[list] = []  # [text, frozen]
    i = 0
    while i < len(normalized):
        match = next((u for u in users if normalized.startswith(u, i)), None)
        if match:
            symbols.append([match, True])
            i += len(match)
        else:
            symbols.append([normalized[i], False])
            i += 1
    while True:
        best, best_score = -1, None
        for k in range(len(symbols) - 1):
            (a, fa), (b, fb) = symbols[k], symbols[k + 1]
            if fa or fb or (a + b) not in pieces:
                continue
            score = model.pieces[pieces[a + b]].score
            if best_score is None or score > best_score:
                best, best_score = k, score
        if best < 0:
            break
        symbols[best] = [symbols[best][0] + symbols[best + 1][0], False]
        del symbols[best + 1]
    ids: list[int] = []
    prev_unk = False
    for s, _ in symbols:
        i = piece_to_id(s)
        is_unk = i == unk
        if is_unk and model.byte_fallback:
            ids.extend(piece_to_id(f"<0x{b:02X}>") for b in s.encode("utf-8"))
        elif not (is_unk and prev_unk):
            ids.append(i)
        prev_unk = is_unk
    return ids
