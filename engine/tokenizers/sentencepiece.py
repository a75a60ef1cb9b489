"""SentencePiece BPE models (kind ``"spm-bpe"``): a ``.model`` file encoded exactly as the
``sentencepiece`` library encodes it (``SentencePieceProcessor.encode(text)`` with default options).

The rules (the file is read by ``engine.tokenizers.spm_model``, the hot loops are
``engine.kernels.spm_normalize`` and ``engine.kernels.spm_bpe``):

- **Normalization** (the whole text is one sentence): user-defined symbols are kept as they are;
  elsewhere the longest key of the model's precompiled charsmap (the compiled ``nmt_nfkc``,
  ``nfkc``, ... rule; empty for ``identity``) is replaced by its string, other characters kept;
  ``remove_extra_whitespaces`` drops leading and trailing spaces and collapses runs of spaces (ASCII
  space only: with ``identity`` a tab or newline is an ordinary character; ``nmt_nfkc`` maps them
  to spaces); ``escape_whitespaces`` writes spaces as ``▁`` (U+2581); ``add_dummy_prefix`` puts one
  ``▁`` before the text (after it with ``treat_whitespace_as_suffix``).
- **Merging**: the normalized text starts as its characters (a user-defined symbol at a position
  is one symbol that never merges); repeatedly the adjacent pair whose concatenation is a piece
  (normal or user-defined) of the highest score merges, the leftmost on ties.
- **Ids**: a symbol that is a piece has its id; any other (a character of no piece) is unknown:
  with ``byte_fallback`` it becomes the ``<0xXX>`` pieces of its UTF-8 bytes, else ``<unk>``, a run
  of unknown symbols giving one ``<unk>``.
- **Chunks** (what makes it fast): SentencePiece merges the whole sentence at once, but a merge
  can only make a piece, so two adjacent characters that are adjacent in no piece (normal or
  user-defined) are never inside one symbol. The sentence is cut between every such pair (with
  the default ``split_by_whitespace`` vocabulary: before every ``▁`` that follows another
  character, and around most punctuation) and each chunk merges alone, to the same symbols in the
  same order; a chunk is merged once and cached. The one effect across a cut, a run of unknown
  symbols becoming one ``<unk>``, is applied as the ids are written. Either way the ids are the
  library's, whatever the vocabulary (``allow_whitespace_only_pieces``, pieces across words).
- **Decoding** (SentencePiece's ``Decode``): control pieces decode to nothing, ``<unk>`` to the
  model's ``unk_surface`` (`` ⁇ ``), runs of byte pieces to their UTF-8 (each invalid byte to
  U+FFFD), ``▁`` to a space, and the leading ``▁`` of the text is dropped (every leading one while
  the text is still empty, with ``remove_extra_whitespaces``). So ``decode(encode(t))`` is the
  normalized ``t`` (spaces for ``▁``) when nothing in ``t`` is unknown to a model without byte fallback.
- **Batches and threads**: ``encode_batch`` / ``encode_documents`` take texts in batches of a
  quarter of the characters on one thread (64k to 4M), of a sixteenth of a thread's share on more
  (64k to 1M: the last batches keep every thread busy); the same ids for any number; a document is
  one sentence, normalized and merged whole (scratch of about 15 bytes per byte of the longest batch).
- **Wrappers**: documents are wrapped in the model's ``bos_piece`` / ``eos_piece`` (``<s>``,
  ``</s>``) unless other pieces are named; a model without one has no BOS (or EOS).

Refused by name (``TokenizerError`` naming the file): model types other than BPE (``UNIGRAM``,
``WORD``, ``CHAR``), ``UNUSED`` pieces, a denormalizer charsmap, a model without ``<unk>``, byte
pieces without ``byte_fallback``, and a piece text defined twice.
"""

from __future__ import annotations

import base64
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

import numpy as np

from engine.checks import positive_int
from engine.errors import TokenizerError
from engine.kernels.bpe_encode import build_pair_table, build_piece_table, new_piece_cache
from engine.kernels.bpe_merge import LONG_WORD, first_entry_table
from engine.kernels.spm_bpe import MAX_CACHED_BYTES, build_join_table, encode_normalized, self_merging_pieces
from engine.kernels.spm_normalize import build_ud_table, charsmap_match, first_bytes, normalize_documents
from engine.tokenizers.base import MAX_VOCAB_SIZE, Tokenizer, check_ids, check_texts, register_tokenizer
from engine.tokenizers.limits import PIECE_CHARS, STREAM_CHARS
from engine.tokenizers.pretokenize import utf8_bytes
from engine.tokenizers.spm_model import (BYTE, CONTROL, MODEL_TYPES, NORMAL, UNKNOWN, UNUSED, USER_DEFINED, SpmModel,
                                         SpmPiece, parse_model)

__all__ = ["SentencePieceTokenizer", "load_sentencepiece"]

SPACE = "\u2581"
# The cache of merged chunks (bpe_encode.new_piece_cache layout), one per thread that encodes: slots
# (it empties at three quarters full: 98k chunks), bytes of chunks longer than a key, their ids.
# About 10 MB each; bounded whatever the input.
CACHE_SLOTS = 1 << 17
CACHE_BYTES = 1 << 21
CACHE_IDS = 1 << 20
_NO_CHARSMAP = np.zeros(0, dtype=np.uint32)


def load_sentencepiece(path: str | os.PathLike, *, bos: str | None = "", eos: str | None = "") -> "SentencePieceTokenizer":
    """The tokenizer of a SentencePiece ``.model`` file (BPE); ``bos`` / ``eos`` name the wrapper
    pieces ("" = the model's own, None = none)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read SentencePiece model: {exc.strerror}") from None
    return SentencePieceTokenizer(parse_model(raw, str(path)), bos=bos, eos=eos, source=str(path))


@register_tokenizer
class SentencePieceTokenizer(Tokenizer):
    """A SentencePiece BPE model, frozen. Ids are the model's piece indices."""

    kind = "spm-bpe"
    thread_safe_encode = True

    def __init__(self, model: SpmModel, *, bos: str | None = "", eos: str | None = "", source: str = "<memory>"):
        self.source = source
        self.model = model
        self._check(model, source)
        pieces = model.pieces
        if len(pieces) > MAX_VOCAB_SIZE:
            raise TokenizerError(f"{source}: {len(pieces)} pieces: expected at most {MAX_VOCAB_SIZE}")
        self.pieces = [p.piece for p in pieces]
        self.types = [p.type for p in pieces]
        self.scores = [p.score for p in pieces]
        self._id_of = {p.piece: i for i, p in enumerate(pieces)}
        self.unk_id = next(i for i, p in enumerate(pieces) if p.type == UNKNOWN)
        self.bos = self._wrapper(model.bos_piece if bos == "" else bos, "bos", source)
        self.eos = self._wrapper(model.eos_piece if eos == "" else eos, "eos", source)
        self.bos_id = None if self.bos is None else self._id_of[self.bos]
        self.eos_id = None if self.eos is None else self._id_of[self.eos]
        self.notes = ()
        self._build_tables()

    # -- checks ---------------------------------------------------------------------------------
    @staticmethod
    def _check(model: SpmModel, source: str) -> None:
        if model.model_type != 2:
            name = MODEL_TYPES.get(model.model_type, f"type {model.model_type}")
            raise TokenizerError(f"{source}: SentencePiece model type {name} is not implemented (engine encodes "
                                 "SentencePiece BPE models only; expected trainer_spec.model_type BPE)")
        seen: dict[str, int] = {}
        unknowns = 0
        for i, p in enumerate(model.pieces):
            if p.type == UNUSED:
                raise TokenizerError(f"{source}: piece {i} ({p.piece!r}) has type UNUSED, which is not implemented "
                                     "(expected NORMAL, UNKNOWN, CONTROL, USER_DEFINED or BYTE pieces)")
            if p.piece in seen:
                raise TokenizerError(f"{source}: piece {p.piece!r} is defined twice (ids {seen[p.piece]} and {i})")
            seen[p.piece] = i
            if math.isnan(p.score):
                raise TokenizerError(f"{source}: piece {i} ({p.piece!r}) has score NaN (expected a number)")
            if p.type == UNKNOWN:
                unknowns += 1
            if p.type == BYTE and not model.byte_fallback:
                raise TokenizerError(f"{source}: byte piece {p.piece!r} is found although byte_fallback is false")
            if p.type == BYTE and _byte_of(p.piece) is None:
                raise TokenizerError(f"{source}: byte piece {p.piece!r} is invalid (expected <0x00> .. <0xFF>)")
        if unknowns != 1:
            raise TokenizerError(f"{source}: the model defines {unknowns} unknown pieces (expected exactly one <unk>)")
        if model.denormalizer_charsmap:
            raise TokenizerError(f"{source}: a denormalizer (denormalizer_spec.precompiled_charsmap) is not "
                                 "implemented (expected a model whose decoding is not renormalized)")

    def _wrapper(self, piece: str | None, what: str, source: str) -> str | None:
        if piece is None:
            return None
        i = self._id_of.get(piece)
        if i is None:
            if piece in (self.model.bos_piece, self.model.eos_piece):
                return None  # the model has no such piece: no wrapper
            raise TokenizerError(f"{source}: {what} piece {piece!r} is not a piece of the model")
        return piece

    # -- tables ---------------------------------------------------------------------------------
    def _piece_to_id(self, text: str) -> int:
        """SentencePiece's PieceToId: reserved pieces (control, unknown, byte) first, then the rest; else unk."""
        i = self._id_of.get(text)
        return self.unk_id if i is None else i

    def _build_tables(self) -> None:
        model = self.model
        n = len(self.pieces)
        mergeable = {p: i for i, p in enumerate(self.pieces) if self.types[i] == NORMAL}
        user = {p: i for i, p in enumerate(self.pieces) if self.types[i] == USER_DEFINED}
        chars = set()
        for p in mergeable:
            chars.update(p)
        chars.update(p for p in self.pieces if len(p) == 1)
        virtual: dict[str, int] = {}
        for c in sorted(chars):
            if c not in mergeable and c not in user:
                virtual[c] = n + len(virtual)
        self._n_syms = n_syms = n + len(virtual)
        top = max((ord(c) for c in chars), default=0)
        char_table = np.full(top + 1, -1, dtype=np.int64)
        for c in chars:
            char_table[ord(c)] = mergeable.get(c, user.get(c, virtual.get(c, -1)))
        sym_out = np.full(n_syms, -1, dtype=np.int64)
        sym_cp = np.full(n_syms, -1, dtype=np.int64)
        for i in list(mergeable.values()) + list(user.values()):
            sym_out[i] = i
        for c, s in virtual.items():
            sym_out[s] = -1 if self._piece_to_id(c) == self.unk_id else self._piece_to_id(c)
            sym_cp[s] = ord(c)

        def sym_of(text: str) -> int | None:
            if text in mergeable:
                return mergeable[text]
            if len(text) == 1 and text in virtual:
                return virtual[text]
            return None

        scores = sorted({self.scores[i] for i in mergeable.values()}, reverse=True)
        rank = {s: k for k, s in enumerate(scores)}
        lefts, rights, made, priorities = [], [], [], []
        for p, i in mergeable.items():
            for cut in range(1, len(p)):
                a, b = sym_of(p[:cut]), sym_of(p[cut:])
                if a is not None and b is not None:
                    lefts.append(a), rights.append(b), made.append(i), priorities.append(rank[self.scores[i]])
        lefts, rights, made, priorities = (np.asarray(x, dtype=np.int64) for x in (lefts, rights, made, priorities))
        pairs, nexts = build_pair_table(lefts, rights)
        # distinct scores: equal priorities are one piece, and a pair's first row orders pairs
        unique = len(scores) == len(mergeable)
        self._merge_tables = (pairs, nexts, lefts, rights, made, priorities, first_entry_table(pairs, made, priorities),
                              unique)
        self._char_table, self._sym_out, self._sym_cp = char_table, sym_out, sym_cp
        self._ascii_ids = np.array([sym_out[char_table[b]] if b < len(char_table) and char_table[b] >= 0 else -1
                                    for b in range(128)], dtype=np.int64)
        self._byte_ids = np.array([self._piece_to_id(f"<0x{b:02X}>") for b in range(256)], dtype=np.int64)
        # user-defined symbols: a byte trie (longest match first)
        encoded = [p.encode("utf-8") for p in user]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        pool = np.frombuffer(b"".join(encoded) or b"\0", dtype=np.uint8)
        self._ud = (*build_ud_table(pool, offsets, np.asarray(list(user.values()), dtype=np.int64)), bool(user))
        self._charsmap = _decode_charsmap(model.precompiled_charsmap, self.source)
        self._searched = first_bytes(self._charsmap[0], *self._ud)
        self._searched = (*self._searched, self._ascii_map(*self._searched))
        joined = {(ord(x), ord(y)) for p in list(mergeable) + list(user) for x, y in zip(p, p[1:])}
        self._ascii_join = np.zeros((128, 128), dtype=np.bool_)
        for x, y in joined:
            if x < 128 and y < 128:
                self._ascii_join[x, y] = True
        rest = [(x, y) for x, y in joined if x >= 128 or y >= 128]
        self._join_table = build_join_table(np.array([x for x, _ in rest], dtype=np.int64),
                                            np.array([y for _, y in rest], dtype=np.int64))
        self._join2 = np.zeros((129, 129), dtype=np.bool_)  # ASCII and ▁ (as 128)
        self._join2[:128, :128] = self._ascii_join
        for x, y in joined:
            if (x < 128 or x == 0x2581) and (y < 128 or y == 0x2581):
                self._join2[min(x, 128), min(y, 128)] = True
        # chunks that are a piece their own characters merge into: looked up, never merged
        encoded = [p.encode("utf-8") for p in self.pieces]
        piece_offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=piece_offsets[1:])
        piece_pool = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        candidates = np.array([t == NORMAL for t in self.types], dtype=np.bool_)
        wanted = self_merging_pieces(piece_pool, piece_offsets, candidates, self._char_table, self._n_syms, *self._ud,
                                     *self._merge_tables, self._sym_out, self._sym_cp, self._byte_ids, self.unk_id,
                                     model.byte_fallback)
        size = 16
        while size < 2 * int(wanted.sum()) + 1:
            size <<= 1
        piece_table = np.zeros((size, 2), dtype=np.uint64)
        build_piece_table(piece_pool, piece_offsets, wanted, piece_table)
        self._pieces_direct = (piece_table, piece_pool, piece_offsets)
        self._caches: list = []

    def _ascii_map(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """What each ASCII byte becomes without a search (``normalize_documents``'s ``ascii_map``)."""
        trie, repl = self._charsmap
        out = np.full(128, -1, dtype=np.int16)
        for b in range(128):
            if first[b] == 0:
                out[b] = b
            elif first[b] == 2 and not second[b].any() and not self._ud[2]:
                length, value = charsmap_match(trie, np.array([b], dtype=np.uint8), 0, 1)
                end = value
                while end < repl.shape[0] and repl[end] != 0:
                    end += 1
                if length == 1 and end - value == 0:
                    out[b] = -2
                elif length == 1 and end - value == 1 and repl[value] < 0x80:
                    out[b] = repl[value]
        return out

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_caches"] = []
        return state

    def clear_piece_caches(self) -> None:
        """Empty the caches of merged chunks (ids never depend on them; benchmarks call this)."""
        for table, _, _, state in list(self._caches):
            table.fill(0)
            state.fill(0)

    # -- encoding -------------------------------------------------------------------------------
    def normalize(self, text: str) -> str:
        """The normalized text the merges run on (``▁`` for spaces when escaping)."""
        data = utf8_bytes(text, None)
        norm, _ = self._normalize(np.frombuffer(data, dtype=np.uint8), np.array([0, len(data)], dtype=np.int64))
        return norm.tobytes().decode("utf-8")

    def _normalize(self, buf: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        trie, repl = self._charsmap
        ud_table, ud_values, has_ud = self._ud
        m = self.model
        documents = offsets.shape[0] - 1
        out_offsets = np.empty(documents + 1, dtype=np.int64)
        size = 3 * buf.shape[0] + 6 * documents + 16
        while True:
            out = np.empty(size, dtype=np.uint8)
            used = normalize_documents(buf, offsets, trie, repl, ud_table, ud_values, has_ud, *self._searched,
                                       m.add_dummy_prefix, m.remove_extra_whitespaces, m.escape_whitespaces,
                                       m.treat_whitespace_as_suffix, out, out_offsets)
            if used >= 0:
                return out[:used], out_offsets
            size *= 2

    def _run(self, buf: np.ndarray, offsets: np.ndarray, wrap: bool) -> tuple[np.ndarray, np.ndarray]:
        norm, norm_offsets = self._normalize(buf, offsets)
        if not norm.flags.writeable:
            norm = norm.copy()
        documents = offsets.shape[0] - 1
        out = np.empty(norm.shape[0] + 2 * documents, dtype=np.uint32)
        out_offsets = np.empty(documents + 1, dtype=np.int64)
        ud_table, ud_values, has_ud = self._ud
        try:
            cache = self._caches.pop()  # atomic: one call uses a cache at a time
        except IndexError:
            cache = new_piece_cache(CACHE_SLOTS, CACHE_BYTES, CACHE_IDS)
        try:
            count = encode_normalized(
                norm, norm_offsets, self._char_table, self._n_syms, ud_table, ud_values, has_ud, *self._merge_tables,
                *self._pieces_direct, self._sym_out, self._sym_cp, self._byte_ids, self.unk_id,
                self.model.byte_fallback, self._ascii_join, self._join_table, self._join2, self._ascii_ids,
                *cache,
                -1 if self.bos_id is None else self.bos_id, -1 if self.eos_id is None else self.eos_id, wrap,
                np.empty(max(norm.shape[0], MAX_CACHED_BYTES), dtype=np.int64), np.empty(LONG_WORD, dtype=np.int64),
                out, out_offsets)
        finally:
            self._caches.append(cache)
        return out[:count], out_offsets

    def _encode(self, text: str, document_id: str | None) -> np.ndarray:
        data = utf8_bytes(text, document_id)
        ids, _ = self._run(np.frombuffer(data, dtype=np.uint8), np.array([0, len(data)], dtype=np.int64), False)
        return ids.copy()

    def encode_document(self, text: str, document_id: str | None = None) -> np.ndarray:
        values, _ = self.encode_documents([text], None if document_id is None else [document_id])
        return values

    def _batch(self, texts: Sequence[str], document_ids, wrap: bool) -> tuple[np.ndarray, np.ndarray, int]:
        """``(ids, offsets, UTF-8 bytes read)`` of one batch of texts."""
        encoded = [utf8_bytes(t, None if document_ids is None else document_ids[i]) for i, t in enumerate(texts)]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
        return (*self._run(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets, wrap), int(offsets[-1]))

    def _chunks(self, texts: Sequence[str], document_ids, threads: int, wrap: bool, progress=None):
        # one thread: about a quarter of the characters a chunk (64k to 4M); more: about a sixteenth of
        # a thread's share (64k to 1M), so that the last chunks leave no thread idle for long
        total = sum(map(len, texts))
        if threads <= 1:
            target = min(max(total // 4, 1 << 16), 1 << 22)
        else:
            target = min(max(total // (16 * threads), 1 << 16), 1 << 20)
        bounds, start, size = [], 0, 0
        for i, t in enumerate(texts):
            size += len(t)
            if size >= target:
                bounds.append((start, i + 1))
                start, size = i + 1, 0
        if start < len(texts) or not bounds:
            bounds.append((start, len(texts)))

        def run(b):
            lo, hi = b
            ids, offsets, nbytes = self._batch(texts[lo:hi], None if document_ids is None else document_ids[lo:hi],
                                               wrap)
            if progress is not None:
                progress(nbytes)
            return ids, offsets

        if threads <= 1 or len(bounds) <= 1:
            return [run(b) for b in bounds]
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return list(pool.map(run, bounds))

    def encode_batch(self, texts: Sequence[str], *, threads: int = 1) -> list[np.ndarray]:
        """Content ids of each text; identical for every ``threads``."""
        texts, _ = check_texts(texts, None, self.kind)
        out = []
        for ids, offsets in self._chunks(list(texts), None, threads, False):
            b = offsets.tolist()
            out.extend(ids[x:y] for x, y in zip(b, b[1:]))
        return out

    def encode_documents(self, texts: Sequence[str], document_ids: Sequence[str] | None = None, *, threads: int = 1,
                         progress=None, stream_chars: int = STREAM_CHARS, piece_chars: int = PIECE_CHARS
                         ) -> tuple[np.ndarray, np.ndarray]:
        """``(values uint32, offsets int64)`` of the wrapped documents ``[BOS, ids..., EOS]`` (no BOS
        or EOS where the tokenizer has none); every document is encoded whole (``stream_chars`` and
        ``piece_chars`` are checked, for the signature every kind shares)."""
        positive_int(stream_chars, "stream_chars")
        positive_int(piece_chars, "piece_chars")
        texts, document_ids = check_texts(texts, document_ids, self.kind)
        results = self._chunks(list(texts), document_ids, threads, True, progress)
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        at, base = 0, 0
        for ids, chunk_offsets in results:
            k = chunk_offsets.shape[0] - 1
            offsets[at + 1:at + k + 1] = chunk_offsets[1:] + base
            at, base = at + k, base + ids.shape[0]
        values = np.concatenate([ids for ids, _ in results]) if results else np.empty(0, dtype=np.uint32)
        return values.astype(np.uint32, copy=False), offsets

    # -- decoding -------------------------------------------------------------------------------
    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        ids = check_ids(ids, len(self.pieces), self.kind).tolist()
        model = self.model
        strip = model.add_dummy_prefix or model.remove_extra_whitespaces
        text: list[str] = []
        empty = True  # nothing written yet
        bos_ws = True
        seen_ws = False
        pending = bytearray()

        def flush():
            nonlocal empty
            if pending:
                decoded = _bytes_text(bytes(pending))
                if decoded:
                    text.append(decoded)
                    empty = False
                pending.clear()

        for i in ids:
            kind = self.types[i]
            if kind == BYTE:
                pending.append(_byte_of(self.pieces[i]))
                continue
            flush()
            if seen_ws or not empty:
                bos_ws = False
            piece = self.pieces[i]
            seen_ws = False
            if kind == CONTROL:
                out = ""
            elif kind == UNKNOWN:
                out = model.unk_surface
            else:
                if bos_ws and strip and piece.startswith(SPACE):
                    piece = piece[1:]
                    seen_ws = not model.remove_extra_whitespaces
                out = piece.replace(SPACE, " ")
            if out:
                text.append(out)
                empty = False
        flush()
        return "".join(text)

    def tokenize(self, text: str) -> list[str]:
        return [self.pieces[i] for i in self.encode(text).tolist()]

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    # -- file format ----------------------------------------------------------------------------
    def _payload(self) -> dict:
        m = self.model
        return {
            "pieces": [[p.piece, p.score, p.type] for p in m.pieces],
            "byte_fallback": m.byte_fallback,
            "treat_whitespace_as_suffix": m.treat_whitespace_as_suffix,
            "unk_surface": m.unk_surface,
            "normalizer": {
                "name": m.normalizer_name,
                "precompiled_charsmap": base64.b64encode(m.precompiled_charsmap).decode("ascii"),
                "add_dummy_prefix": m.add_dummy_prefix,
                "remove_extra_whitespaces": m.remove_extra_whitespaces,
                "escape_whitespaces": m.escape_whitespaces,
            },
            "bos": self.bos,
            "eos": self.eos,
        }

    @classmethod
    def _from_payload(cls, payload: dict) -> "SentencePieceTokenizer":
        norm = payload["normalizer"]
        model = SpmModel(
            pieces=[SpmPiece(str(p), float(s), int(t)) for p, s, t in payload["pieces"]],
            model_type=2,
            byte_fallback=bool(payload["byte_fallback"]),
            treat_whitespace_as_suffix=bool(payload["treat_whitespace_as_suffix"]),
            unk_surface=str(payload["unk_surface"]),
            normalizer_name=str(norm["name"]),
            precompiled_charsmap=base64.b64decode(norm["precompiled_charsmap"], validate=True),
            add_dummy_prefix=bool(norm["add_dummy_prefix"]),
            remove_extra_whitespaces=bool(norm["remove_extra_whitespaces"]),
            escape_whitespaces=bool(norm["escape_whitespaces"]),
        )
        return cls(model, bos=payload["bos"], eos=payload["eos"])


def _bytes_text(data: bytes) -> str:
    """``data`` as text, each byte that starts no valid UTF-8 character becoming U+FFFD on its own
    (SentencePiece's rule for runs of byte pieces; Python's ``errors="replace"`` would join some)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out, i = [], 0
    while i < len(data):
        lead = data[i]
        n = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        try:
            out.append(data[i:i + n].decode("utf-8"))
            i += n
        except UnicodeDecodeError:
            out.append("\ufffd")
            i += 1
    return "".join(out)


def _byte_of(piece: str) -> int | None:
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        try:
            return int(piece[3:5], 16)
        except ValueError:
            return None
    return None


def _decode_charsmap(blob: bytes, source: str) -> tuple[np.ndarray, np.ndarray]:
    """``(trie units uint32, replacements uint8)`` of a precompiled charsmap: a little-endian uint32
    size of the trie in bytes, the Darts double array, then NUL-terminated replacement strings."""
    if not blob:
        return _NO_CHARSMAP, np.frombuffer(b"\0", dtype=np.uint8)
    if len(blob) <= 4:
        raise TokenizerError(f"{source}: precompiled_charsmap is broken ({len(blob)} bytes; expected a trie size and a trie)")
    size = int.from_bytes(blob[:4], "little")
    if size >= len(blob) or size % 4:
        raise TokenizerError(f"{source}: precompiled_charsmap's trie size {size} does not fit its {len(blob)} bytes")
    trie = np.frombuffer(blob[4:4 + size], dtype="<u4").astype(np.uint32)
    repl = np.frombuffer(blob[4 + size:] + b"\0", dtype=np.uint8)
    return trie, repl
