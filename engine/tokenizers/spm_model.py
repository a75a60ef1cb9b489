"""Reading a SentencePiece ``.model`` file: a ``ModelProto`` in the protobuf wire format, parsed here
without the protobuf or sentencepiece libraries.

The schema read (field numbers of ``sentencepiece_model.proto``, proto2):

- ``ModelProto``: ``pieces`` = 1 (repeated ``SentencePiece``), ``trainer_spec`` = 2,
  ``normalizer_spec`` = 3, ``self_test_data`` = 4 (skipped), ``denormalizer_spec`` = 5;
- ``SentencePiece``: ``piece`` = 1 (string), ``score`` = 2 (float), ``type`` = 3 (NORMAL = 1,
  UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6; default NORMAL);
- ``TrainerSpec``: ``model_type`` = 3 (UNIGRAM = 1, BPE = 2, WORD = 3, CHAR = 4; default UNIGRAM),
  ``vocab_size`` = 4, ``split_by_whitespace`` = 22, ``treat_whitespace_as_suffix`` = 24,
  ``split_digits`` = 25, ``allow_whitespace_only_pieces`` = 26, ``byte_fallback`` = 35,
  ``unk_id`` / ``bos_id`` / ``eos_id`` / ``pad_id`` = 40..43, ``unk_surface`` = 44,
  ``unk_piece`` / ``bos_piece`` / ``eos_piece`` / ``pad_piece`` = 45..48;
- ``NormalizerSpec``: ``name`` = 1, ``precompiled_charsmap`` = 2 (bytes), ``add_dummy_prefix`` = 3,
  ``remove_extra_whitespaces`` = 4, ``escape_whitespaces`` = 5 (each default true),
  ``normalization_rule_tsv`` = 6.

Fields not listed are skipped by their wire type. A file that is not such a message (a bad tag,
a length past the end, a piece without text) is a ``TokenizerError`` naming the file and the byte
offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from engine.errors import TokenizerError

__all__ = ["SpmModel", "SpmPiece", "parse_model", "looks_like_model", "NORMAL", "UNKNOWN", "CONTROL", "USER_DEFINED",
           "UNUSED", "BYTE", "PIECE_TYPES", "MODEL_TYPES"]

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
PIECE_TYPES = {NORMAL: "NORMAL", UNKNOWN: "UNKNOWN", CONTROL: "CONTROL", USER_DEFINED: "USER_DEFINED",
               UNUSED: "UNUSED", BYTE: "BYTE"}
MODEL_TYPES = {1: "UNIGRAM", 2: "BPE", 3: "WORD", 4: "CHAR"}


@dataclass(frozen=True)
class SpmPiece:
    piece: str
    score: float
    type: int


@dataclass
class SpmModel:
    """What encoding and decoding read from a ``ModelProto`` (defaults are the schema's)."""

    pieces: list[SpmPiece] = field(default_factory=list)
    model_type: int = 1
    byte_fallback: bool = False
    treat_whitespace_as_suffix: bool = False
    split_by_whitespace: bool = True
    split_digits: bool = False
    allow_whitespace_only_pieces: bool = False
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    unk_piece: str = "<unk>"
    bos_piece: str = "<s>"
    eos_piece: str = "</s>"
    pad_piece: str = "<pad>"
    unk_surface: str = " \u2047 "
    normalizer_name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    normalization_rule_tsv: str = ""
    denormalizer_charsmap: bytes = b""
    denormalizer_rule_tsv: str = ""


class _Reader:
    def __init__(self, data: bytes, source: str, base: int = 0):
        self.data, self.source, self.base, self.pos = data, source, base, 0

    def fail(self, what: str) -> TokenizerError:
        return TokenizerError(f"{self.source}: not a SentencePiece model: {what} at byte {self.base + self.pos} "
                              "(expected a ModelProto in the protobuf wire format)")

    def varint(self) -> int:
        result, shift = 0, 0
        data = self.data
        while True:
            if self.pos >= len(data):
                raise self.fail("varint cut short")
            b = data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise self.fail("varint longer than 10 bytes")

    def fields(self):
        """``(field number, wire type, value)``: an int (varint, fixed32/64 as raw ints) or a bytes
        slice with its offset (length-delimited)."""
        data = self.data
        while self.pos < len(data):
            key = self.varint()
            number, wire = key >> 3, key & 7
            if number == 0:
                raise self.fail("field number 0")
            if wire == 0:
                yield number, wire, self.varint(), 0
            elif wire == 1:
                if self.pos + 8 > len(data):
                    raise self.fail("fixed64 cut short")
                yield number, wire, data[self.pos:self.pos + 8], 0
                self.pos += 8
            elif wire == 2:
                length = self.varint()
                if self.pos + length > len(data):
                    raise self.fail(f"field {number} of {length} bytes runs past the end")
                start = self.pos
                self.pos += length
                yield number, wire, data[start:start + length], self.base + start
            elif wire == 5:
                if self.pos + 4 > len(data):
                    raise self.fail("fixed32 cut short")
                yield number, wire, data[self.pos:self.pos + 4], 0
                self.pos += 4
            else:
                raise self.fail(f"wire type {wire} of field {number}")


def _int32(value: int) -> int:
    """A proto int32 read as a varint (negative values are 10-byte two's complement)."""
    value &= (1 << 64) - 1
    if value >= 1 << 63:
        value -= 1 << 64
    return int(value)


def _text(value: bytes, source: str, what: str) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TokenizerError(f"{source}: {what} is not valid UTF-8 (byte {exc.start}); expected UTF-8 text") from None


def _expect(wire: int, want: int, reader: _Reader, what: str) -> None:
    if wire != want:
        raise reader.fail(f"{what} has wire type {wire} (expected {want})")


def _piece(data: bytes, source: str, base: int, index: int) -> SpmPiece:
    reader = _Reader(data, source, base)
    piece, score, kind = None, 0.0, NORMAL
    for number, wire, value, _ in reader.fields():
        if number == 1:
            _expect(wire, 2, reader, "piece text")
            piece = _text(value, source, f"piece {index}")
        elif number == 2:
            _expect(wire, 5, reader, "piece score")
            score = struct.unpack("<f", value)[0]
        elif number == 3:
            _expect(wire, 0, reader, "piece type")
            kind = int(value)
    if not piece:
        raise TokenizerError(f"{source}: piece {index} has no text (expected a non-empty piece)")
    if kind not in PIECE_TYPES:
        raise TokenizerError(f"{source}: piece {index} ({piece!r}) has unknown type {kind} "
                             f"(expected one of {', '.join(f'{v} = {k}' for k, v in PIECE_TYPES.items())})")
    return SpmPiece(piece, float(score), kind)


_TRAINER_INTS = {40: "unk_id", 41: "bos_id", 42: "eos_id", 43: "pad_id"}
_TRAINER_BOOLS = {22: "split_by_whitespace", 24: "treat_whitespace_as_suffix", 25: "split_digits",
                  26: "allow_whitespace_only_pieces", 35: "byte_fallback"}
_TRAINER_STRINGS = {44: "unk_surface", 45: "unk_piece", 46: "bos_piece", 47: "eos_piece", 48: "pad_piece"}


def _trainer(data: bytes, source: str, base: int, model: SpmModel) -> None:
    reader = _Reader(data, source, base)
    for number, wire, value, _ in reader.fields():
        if number == 3:
            _expect(wire, 0, reader, "trainer_spec.model_type")
            model.model_type = int(value)
        elif number in _TRAINER_INTS:
            _expect(wire, 0, reader, f"trainer_spec.{_TRAINER_INTS[number]}")
            setattr(model, _TRAINER_INTS[number], _int32(value))
        elif number in _TRAINER_BOOLS:
            _expect(wire, 0, reader, f"trainer_spec.{_TRAINER_BOOLS[number]}")
            setattr(model, _TRAINER_BOOLS[number], bool(value))
        elif number in _TRAINER_STRINGS:
            _expect(wire, 2, reader, f"trainer_spec.{_TRAINER_STRINGS[number]}")
            setattr(model, _TRAINER_STRINGS[number], _text(value, source, f"trainer_spec.{_TRAINER_STRINGS[number]}"))


def _normalizer(data: bytes, source: str, base: int, model: SpmModel, denormalizer: bool) -> None:
    reader = _Reader(data, source, base)
    for number, wire, value, _ in reader.fields():
        if number == 1 and not denormalizer:
            _expect(wire, 2, reader, "normalizer_spec.name")
            model.normalizer_name = _text(value, source, "normalizer_spec.name")
        elif number == 2:
            _expect(wire, 2, reader, "precompiled_charsmap")
            if denormalizer:
                model.denormalizer_charsmap = bytes(value)
            else:
                model.precompiled_charsmap = bytes(value)
        elif number in (3, 4, 5) and not denormalizer:
            _expect(wire, 0, reader, "normalizer_spec flag")
            name = {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}[number]
            setattr(model, name, bool(value))
        elif number == 6:
            _expect(wire, 2, reader, "normalization_rule_tsv")
            text = _text(value, source, "normalization_rule_tsv")
            if denormalizer:
                model.denormalizer_rule_tsv = text
            else:
                model.normalization_rule_tsv = text


def parse_model(data: bytes, source: str = "<memory>") -> SpmModel:
    """The ``SpmModel`` of a serialized ``ModelProto``; ``TokenizerError`` naming ``source`` otherwise."""
    reader = _Reader(bytes(data), source)
    model = SpmModel()
    pieces = []
    for number, wire, value, base in reader.fields():
        if number == 1:
            _expect(wire, 2, reader, "ModelProto.pieces")
            pieces.append(_piece(value, source, base, len(pieces)))
        elif number == 2:
            _expect(wire, 2, reader, "ModelProto.trainer_spec")
            _trainer(value, source, base, model)
        elif number == 3:
            _expect(wire, 2, reader, "ModelProto.normalizer_spec")
            _normalizer(value, source, base, model, False)
        elif number == 5:
            _expect(wire, 2, reader, "ModelProto.denormalizer_spec")
            _normalizer(value, source, base, model, True)
    if not pieces:
        raise TokenizerError(f"{source}: not a SentencePiece model: it holds no pieces (expected a ModelProto)")
    model.pieces = pieces
    return model


def looks_like_model(raw: bytes) -> bool:
    """True when ``raw`` starts like a ``ModelProto``: field 1 (a piece, length-delimited) whose own
    first field is a piece text (tag 0x0A). JSON and tiktoken files start with text, never 0x0A."""
    if len(raw) < 4 or raw[0] != 0x0A:
        return False
    reader = _Reader(raw[:64], "")
    try:
        reader.pos = 1
        length = reader.varint()
    except TokenizerError:
        return False
    return length > 0 and reader.pos < len(raw) and raw[reader.pos] == 0x0A
