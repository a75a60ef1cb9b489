"""One store file holding one long document, written page by page from a file of its token ids.

Arrow's Parquet writer takes a row whole and holds about 13-20 bytes per token of it while it
writes (levels, pages), so a document of 250M tokens would need gigabytes. ``write_long_row``
writes the same store file (schema, Arrow schema metadata, one row group, one row) itself, reading
the ids ``PAGE_VALUES`` at a time: memory is one page whatever the document's length.

The file is plain Parquet that any reader takes: the footer (Thrift compact protocol) names the
schema ``{id: string, tokens: large_list<uint32>}`` (Parquet: ``optional binary id (String)``,
``optional group tokens (List) {repeated group list {optional int32 element (Int(32, unsigned))}}``)
and carries the store schema's key-value metadata (``ARROW:schema`` included) taken from a file
Arrow writes with that schema, so ``pyarrow`` reads back exactly the store's schema. Data pages are
version 1: repetition levels (0 for the row's first value, 1 after), definition levels (3: every
element present), both RLE runs, then the values PLAIN; each page is compressed with the codec
Arrow uses for the store's other files (snappy). A row spans many pages, as Parquet v1 allows.
"""

from __future__ import annotations

import io
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["write_long_row", "PAGE_VALUES"]

# Token ids per data page (4 MB of values).
PAGE_VALUES = 1 << 20

# parquet.thrift enums
_INT32, _BYTE_ARRAY = 1, 6
_OPTIONAL, _REPEATED, _REQUIRED = 1, 2, 0
_UTF8, _LIST, _UINT_32 = 0, 3, 13
_PLAIN, _RLE = 0, 3
_DATA_PAGE = 0
_CODECS = {"snappy": 1, "uncompressed": 0}
# Thrift compact protocol types
_TRUE, _FALSE, _BYTE, _I32, _I64, _BINARY, _LIST_T, _STRUCT = 1, 2, 3, 5, 6, 8, 9, 12


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _zigzag(value: int) -> bytes:
    return _varint((value << 1) ^ (value >> 63))


class _Struct:
    """A Thrift struct in the compact protocol: fields in increasing id order, then STOP."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.last = 0

    def _header(self, field: int, kind: int) -> None:
        delta = field - self.last
        if 0 < delta <= 15:
            self.out.append((delta << 4) | kind)
        else:
            self.out.append(kind)
            self.out += _zigzag(field)
        self.last = field

    def i32(self, field: int, value: int) -> "_Struct":
        self._header(field, _I32)
        self.out += _zigzag(value)
        return self

    def i64(self, field: int, value: int) -> "_Struct":
        self._header(field, _I64)
        self.out += _zigzag(value)
        return self

    def byte(self, field: int, value: int) -> "_Struct":
        self._header(field, _BYTE)
        self.out.append(value & 0xFF)
        return self

    def boolean(self, field: int, value: bool) -> "_Struct":
        self._header(field, _TRUE if value else _FALSE)
        return self

    def binary(self, field: int, value: bytes | str) -> "_Struct":
        data = value.encode("utf-8") if isinstance(value, str) else value
        self._header(field, _BINARY)
        self.out += _varint(len(data)) + data
        return self

    def struct(self, field: int, value: "_Struct") -> "_Struct":
        self._header(field, _STRUCT)
        self.out += value.done()
        return self

    def items(self, field: int, kind: int, values: list) -> "_Struct":
        """A list of ``kind`` (_I32, _BINARY or _STRUCT)."""
        self._header(field, _LIST_T)
        size = len(values)
        self.out += bytes([(size << 4) | kind]) if size < 15 else bytes([0xF0 | kind]) + _varint(size)
        for value in values:
            if kind == _I32:
                self.out += _zigzag(value)
            elif kind == _BINARY:
                data = value.encode("utf-8") if isinstance(value, str) else value
                self.out += _varint(len(data)) + data
            else:
                self.out += value.done()
        return self

    def done(self) -> bytes:
        return bytes(self.out) + b"\x00"


def _rle_run(count: int, value: int) -> bytes:
    """One RLE run of the RLE/bit-packing hybrid (levels of bit width <= 8: one byte per value)."""
    return _varint(count << 1) + bytes([value])


def _levels(runs: list[tuple[int, int]]) -> bytes:
    data = b"".join(_rle_run(count, value) for count, value in runs if count)
    return len(data).to_bytes(4, "little") + data


def _schema_elements() -> list[_Struct]:
    string = _Struct().struct(1, _Struct())  # LogicalType.STRING
    list_type = _Struct().struct(3, _Struct())  # LogicalType.LIST
    uint32 = _Struct().struct(10, _Struct().byte(1, 32).boolean(2, False))  # LogicalType.INTEGER
    return [
        _Struct().i32(3, _REQUIRED).binary(4, "schema").i32(5, 2),
        _Struct().i32(1, _BYTE_ARRAY).i32(3, _OPTIONAL).binary(4, "id").i32(6, _UTF8).struct(10, string),
        _Struct().i32(3, _OPTIONAL).binary(4, "tokens").i32(5, 1).i32(6, _LIST).struct(10, list_type),
        _Struct().i32(3, _REPEATED).binary(4, "list").i32(5, 1),
        _Struct().i32(1, _INT32).i32(3, _OPTIONAL).binary(4, "element").i32(6, _UINT_32).struct(10, uint32),
    ]


def _key_values(schema: pa.Schema) -> list[_Struct]:
    """The key-value metadata Arrow writes for ``schema`` (its own keys and ``ARROW:schema``)."""
    sink = io.BytesIO()
    pq.write_table(schema.empty_table(), sink)
    sink.seek(0)
    metadata = pq.read_metadata(sink).metadata or {}
    return [_Struct().binary(1, key).binary(2, value) for key, value in metadata.items()]


class _Column:
    """Pages of one column chunk as they are written: offsets, sizes, value count."""

    def __init__(self, fh, codec: str, physical: int, path: list[str]):
        self.fh, self.codec, self.physical, self.path = fh, codec, physical, path
        self.first = fh.tell()
        self.values = self.compressed = self.uncompressed = 0

    def page(self, body: bytes, count: int) -> None:
        data = body if self.codec == "uncompressed" else pa.compress(body, codec=self.codec, asbytes=True)
        header = _Struct().i32(1, _DATA_PAGE).i32(2, len(body)).i32(3, len(data)).struct(
            5, _Struct().i32(1, count).i32(2, _PLAIN).i32(3, _RLE).i32(4, _RLE)).done()
        self.fh.write(header)
        self.fh.write(data)
        self.values += count
        self.compressed += len(header) + len(data)
        self.uncompressed += len(header) + len(body)

    def chunk(self) -> _Struct:
        meta = (_Struct().i32(1, self.physical).items(2, _I32, [_PLAIN, _RLE]).items(3, _BINARY, self.path)
                .i32(4, _CODECS[self.codec]).i64(5, self.values).i64(6, self.uncompressed)
                .i64(7, self.compressed).i64(9, self.first))
        return _Struct().i64(2, self.first).struct(3, meta)


def write_long_row(path: str | os.PathLike, schema: pa.Schema, doc_id: str, ids_file: str | os.PathLike,
                   count: int, *, page_values: int = PAGE_VALUES, codec: str = "snappy") -> None:
    """Write the store file ``path`` holding one row: ``doc_id`` and the ``count`` uint32 ids stored
    (native little-endian) in ``ids_file``. ``schema`` is the store's (its metadata is copied)."""
    if codec != "uncompressed" and not pa.Codec.is_available(codec):
        codec = "uncompressed"
    with open(path, "wb") as fh, open(ids_file, "rb") as ids:
        fh.write(b"PAR1")
        name = doc_id.encode("utf-8")
        id_column = _Column(fh, codec, _BYTE_ARRAY, ["id"])
        id_column.page(_levels([(1, 1)]) + len(name).to_bytes(4, "little") + name, 1)
        tokens = _Column(fh, codec, _INT32, ["tokens", "list", "element"])
        done = 0
        while done < count:
            take = min(page_values, count - done)
            values = np.fromfile(ids, dtype="<u4", count=take)
            if values.shape[0] != take:
                raise OSError(f"{ids_file}: holds {done + values.shape[0]:,} ids, expected {count:,}")
            first = 1 if done == 0 else 0
            levels = _levels([(first, 0), (take - first, 1)]) + _levels([(take, 3)])
            tokens.page(levels + values.tobytes(), take)
            done += take
        columns = [id_column.chunk(), tokens.chunk()]
        size = id_column.uncompressed + tokens.uncompressed
        group = (_Struct().items(1, _STRUCT, columns).i64(2, size).i64(3, 1).i64(5, id_column.first)
                 .i64(6, id_column.compressed + tokens.compressed))
        footer = (_Struct().i32(1, 2).items(2, _STRUCT, _schema_elements()).i64(3, 1).items(4, _STRUCT, [group])
                  .items(5, _STRUCT, _key_values(schema)).binary(6, "engine")
                  .done())
        fh.write(footer)
        fh.write(len(footer).to_bytes(4, "little"))
        fh.write(b"PAR1")
