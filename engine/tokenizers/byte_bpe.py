"""Byte-level BPE: the frozen tokenizer (kind ``"bpe-byte"``) and its trainer.

The byte-level rule (GPT-2 style): the initial alphabet is the 256 byte values, so any text encodes
and nothing is unknown; the pre-tokenizer (GPT-2's pattern by default, cl100k's or o200k's, as
``engine.tokenizers.pretokenize`` spells them, or any regex: Llama 3's, Qwen2's...) cuts the text
into pieces encoded apart; merges are
ranked as trained. With the same ranks it gives exactly the ids that ``tiktoken`` (``encode_ordinary``) and
Hugging Face ``tokenizers`` (``encode(text, add_special_tokens=False)``) give, and it imports and
exports both formats (``engine.tokenizers.interop``).

A tokenizer is a vocabulary of byte strings with ids, a pre-tokenizer pattern, and the order in
which pairs merge. Two merge rules, chosen by where the vocabulary came from:

- ``merges`` given (trained here, or a ``tokenizer.json``): pair (a, b) merges with priority =
  its position in ``merges`` (GPT-2 / Hugging Face semantics);
- no ``merges`` (a tiktoken file): any two adjacent parts whose concatenation is a token merge,
  with priority = that token's rank, and a piece that is itself a token is that token (tiktoken
  semantics).

Encoding runs in ``engine.kernels.bpe_encode`` (nogil, shared with character-level BPE); ``encode_batch`` spreads documents
over threads and gives the same ids for any thread count. Ids of a trained tokenizer:
``<bos>`` = 0, ``<eos>`` = 1, byte b = 2 + b, then one id per new token in merge order.
"""

from __future__ import annotations

import base64
from binascii import b2a_base64
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Sequence

import numpy as np

from engine.checks import check_count
from engine.errors import TokenizerError
from engine.kernels.bpe_encode import (build_pair_table, build_piece_table, encode_bytes, encode_scratch,
                                       new_piece_cache, self_merging_tokens)
from engine.kernels.bpe_merge import first_entry_table, merge_long_pieces_windowed
from engine.kernels.bpe_train import TIE_FIRST, TIE_HF, count_pieces, rehash_words, train_merges
from engine.kernels.pretokenize import ascii_table, pretokenize_ends
from engine.tokenizers.base import (MAX_VOCAB_SIZE, FitOptions, Tokenizer, _iter_texts, check_file_id, check_ids,
                                   check_special_ids, check_texts, register_tokenizer)
from engine.tokenizers.pretokenize import canonical_pattern, pattern_code, utf8_bytes
from engine.tokenizers.limits import PIECE_CHARS, STREAM_CHARS, PieceCacheLimits, TrainLimits
from engine.tokenizers.streaming import byte_level_span, byte_level_text_span, encode_streaming, fit_texts
from engine.tokenizers.unicode_tables import code_point_classes

__all__ = ["ByteBpeTokenizer", "ByteBpeTrainer", "bytes_to_unicode"]


@functools.lru_cache(maxsize=1)
def _ascii_flags() -> np.ndarray:
    """``pretokenize.ascii_table`` of the code point classes, built once (``encode_bytes`` takes it)."""
    return ascii_table(code_point_classes())


@functools.lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 bytes to printable characters (used by tokenizer.json)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def _power_of_two_at_least(n: int) -> int:
    size = 16
    while size < n:
        size <<= 1
    return size


@register_tokenizer
class ByteBpeTokenizer(Tokenizer):
    """Frozen byte-level BPE. ``tokens[id]`` is the byte string of ``id`` (``None`` for specials).
    ``cache``: the size of each encoding thread's cache of merged pieces (``PieceCacheLimits``; not saved)."""

    kind = "bpe-byte"
    fit_name = "byte-bpe"
    fit_options = frozenset({"merges", "vocab_size", "pattern", "tie_break", "max_types"})
    thread_safe_encode = True
    _streams_long_texts = True

    def __init__(
        self,
        tokens: Sequence[bytes | None],
        *,
        merges: Sequence[tuple[int, int]] | None = None,
        specials: dict[str, int] | None = None,
        pattern: str = "gpt2",
        bos: str = "<bos>",
        eos: str = "<eos>",
        whole_piece_first: bool | None = None,
        cache: PieceCacheLimits = PieceCacheLimits(),
    ):
        if not isinstance(cache, PieceCacheLimits):
            raise TokenizerError(f"cache is {type(cache).__name__}; expected a PieceCacheLimits")
        self.cache = cache  # the size of each thread's cache of merged pieces (not saved)
        self.pattern = canonical_pattern(pattern)  # a name, or the regex when it is none of the named ones
        self._pattern_code = pattern_code(self.pattern)
        self.tokens = [None if t is None else bytes(t) for t in tokens]
        self.specials = check_special_ids(specials if specials is not None else {"<bos>": 0, "<eos>": 1})
        if len(self.tokens) > MAX_VOCAB_SIZE:
            raise TokenizerError(f"{len(self.tokens)} token ids: expected at most {MAX_VOCAB_SIZE}")
        self.merges = None if merges is None else [(int(a), int(b)) for a, b in merges]
        self.whole_piece_first = (self.merges is None) if whole_piece_first is None else bool(whole_piece_first)
        for name, value in (("bos", bos), ("eos", eos)):
            if value not in self.specials:
                raise TokenizerError(f"{name} token {value!r} is not a special token (specials: {sorted(self.specials)})")
        self.bos, self.eos = bos, eos
        self.bos_id, self.eos_id = self.specials[bos], self.specials[eos]
        self._build_tables()

    @classmethod
    def trainer(cls, options: FitOptions) -> "ByteBpeTrainer":
        return ByteBpeTrainer(options.merges_or_default(), vocab_size=options.vocab_size,
                              pattern=options.pattern or "gpt2", tie_break=options.tie_break or "first")

    # -- tables -------------------------------------------------------------------------------
    def _build_tables(self) -> None:
        size = max(len(self.tokens), max(self.specials.values(), default=-1) + 1)
        for name, i in self.specials.items():
            if i < len(self.tokens) and self.tokens[i] is not None:
                raise TokenizerError(f"special token {name!r} has id {i}, which is also the id of a byte token")
        id_of = {}
        for i, t in enumerate(self.tokens):
            if t is None:
                continue
            if len(t) == 0:
                raise TokenizerError(f"token id {i} is the empty byte string (expected at least one byte)")
            if t in id_of:
                raise TokenizerError(f"token ids {id_of[t]} and {i} have the same bytes {t!r} (expected distinct tokens)")
            id_of[t] = i
        byte_ids = np.empty(256, dtype=np.int64)
        for b in range(256):
            i = id_of.get(bytes([b]))
            if i is None:
                raise TokenizerError(f"vocabulary lacks the single byte 0x{b:02x} (a byte-level vocabulary needs all 256)")
            byte_ids[b] = i
        lefts, rights, merged, priorities = [], [], [], []
        if self.merges is not None:
            for k, (a, b) in enumerate(self.merges):
                if (not (0 <= a < len(self.tokens) and 0 <= b < len(self.tokens)) or self.tokens[a] is None
                        or self.tokens[b] is None):
                    raise TokenizerError(f"merge {k} ({a}, {b}) names an id that is not a byte token")
                target = id_of.get(self.tokens[a] + self.tokens[b])
                if target is None:
                    raise TokenizerError(f"merge {k} ({a}, {b}) makes {self.tokens[a] + self.tokens[b]!r}, which is not "
                                         "in the vocabulary")
                lefts.append(a), rights.append(b), merged.append(target), priorities.append(k)
        else:
            for t, i in id_of.items():
                for cut in range(1, len(t)):
                    a, b = id_of.get(t[:cut]), id_of.get(t[cut:])
                    if a is not None and b is not None:
                        lefts.append(a), rights.append(b), merged.append(i), priorities.append(i)
        self._merge_entries = [np.asarray(column, dtype=np.int64) for column in (lefts, rights, merged, priorities)]
        self._byte_ids = byte_ids
        lengths = np.zeros(size, dtype=np.int64)
        for i, t in enumerate(self.tokens):
            if t is not None:
                lengths[i] = len(t)
        self._token_lengths = lengths  # bytes of each id: a long piece's windows cut at token ends
        self._token_offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(lengths, out=self._token_offsets[1:])
        self._token_pool = np.frombuffer(b"".join(t for t in self.tokens if t is not None), dtype=np.uint8)
        self._encoder_tables = None  # built by the first encode (_encoder): training and decoding never need them
        self._piece_caches: list = []  # idle piece caches (_run takes one per call, so threads never share one)
        self._size = size

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_piece_caches"] = []  # caches belong to one process; a copy starts with none
        return state

    def clear_piece_caches(self) -> None:
        """Empty this tokenizer's caches of merged pieces, keeping their memory: the next encode
        meets every piece as new, as on text it has never seen. Ids never depend on the caches;
        the benchmarks call this so that a timed run meets no piece an earlier run merged. A cache
        in use by another thread's call at that moment is left as it is."""
        for table, _, _, state in list(self._piece_caches):
            table.fill(0)
            state.fill(0)

    # -- encoding -----------------------------------------------------------------------------
    def _encoder(self) -> tuple:
        """``(pairs, nexts, lefts, rights, made, priorities, piece_table, first)``, built once, on first
        use (``first``: the pairs' first entries, ``bpe_merge.first_entry_table``).

        A pair merges by its first entry. Pieces that are a token whose own bytes merge into it (all
        tokens under ``whole_piece_first``) are looked up directly in ``build_piece_table``'s table.
        Threads that meet it unbuilt may each build it: the tables are the same, either one is kept.
        """
        tables = self._encoder_tables
        if tables is None:
            entries = self._merge_entries
            merge_table = (*build_pair_table(entries[0], entries[1]), *entries)
            if self.whole_piece_first:
                wanted = np.diff(self._token_offsets) >= 2
            else:
                wanted = self_merging_tokens(self._token_pool, self._token_offsets, self._byte_ids, *merge_table)
            piece_table = np.zeros((_power_of_two_at_least(2 * int(wanted.sum()) + 1), 2), dtype=np.uint64)
            build_piece_table(self._token_pool, self._token_offsets, wanted, piece_table)
            first = first_entry_table(merge_table[0], merge_table[4], merge_table[5])
            tables = self._encoder_tables = (*merge_table, piece_table, first)
        return tables

    def _run(self, buf: np.ndarray, document_offsets: np.ndarray, wrap: bool) -> tuple[np.ndarray, np.ndarray]:
        documents = document_offsets.shape[0] - 1
        out = np.empty(buf.shape[0] + 2 * documents, dtype=np.uint32)
        out_offsets = np.empty(documents + 1, dtype=np.int64)
        pairs, nexts, _, _, made, priorities, piece_table, first = self._encoder()
        try:
            cache = self._piece_caches.pop()  # atomic: a cache is in one call at a time
        except IndexError:
            cache = new_piece_cache(self.cache.slots, self.cache.pool_bytes, self.cache.pool_ids)
        try:
            scratch = encode_scratch(buf.shape[0])
            count, long_count = encode_bytes(
                buf, document_offsets, code_point_classes(), _ascii_flags(), self._pattern_code, self._byte_ids,
                first, piece_table, self._token_pool, self._token_offsets, *cache, self.bos_id, self.eos_id, wrap,
                *scratch, out, out_offsets,
            )
            long_pieces = scratch[-1]
        finally:
            self._piece_caches.append(cache)
        if long_count:  # pieces longer than cache.long_piece_window bytes are merged window by window
            count = merge_long_pieces_windowed(out, out_offsets, long_pieces, long_count, pairs, nexts, made,
                                               priorities, self._token_lengths, self.cache.long_piece_window)
        return out[:count], out_offsets

    def _encode(self, text: str, document_id: str | None) -> np.ndarray:
        data = utf8_bytes(text, document_id)
        ids, _ = self._run(np.frombuffer(data, dtype=np.uint8), np.array([0, len(data)], dtype=np.int64), False)
        return ids.copy()

    def _encode_chunks(self, texts: Sequence[str], document_ids: Sequence[str] | None, threads: int, wrap: bool):
        """``[(ids, offsets)]`` of ``texts`` cut into chunks of about a quarter of a thread's share of
        the characters (at least 64k), encoded on ``threads`` threads. A chunk's texts become UTF-8
        in its own thread, so that work overlaps the other threads' kernels; a lone surrogate
        still names the first text that holds one."""
        ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
        target = max(int(ends[-1]) // max(4 * threads, 1) if len(texts) else 0, 1 << 16)
        chunks, start, base = [], 0, 0
        while start < len(texts):  # a chunk ends with the text that brings it to ``target`` characters
            stop = min(int(np.searchsorted(ends, base + target)), len(texts) - 1) + 1
            chunks.append((start, stop))
            start, base = stop, int(ends[stop - 1])

        def run(bounds):
            lo, hi = bounds
            try:
                encoded = [t.encode("utf-8") for t in texts[lo:hi]]
            except UnicodeEncodeError:  # name the text and the offset
                encoded = [utf8_bytes(texts[i], None if document_ids is None else document_ids[i]) for i in range(lo, hi)]
            offsets = np.zeros(hi - lo + 1, dtype=np.int64)
            np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=hi - lo), out=offsets[1:])
            return self._run(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets, wrap)

        if threads <= 1 or len(chunks) <= 1:
            return [run(c) for c in chunks]
        with ThreadPoolExecutor(max_workers=threads) as pool:
            return list(pool.map(run, chunks))

    def encode_batch(self, texts: Sequence[str], *, threads: int = 1) -> list[np.ndarray]:
        """Content ids of each text (uint32 arrays: views of one array per chunk of texts); identical
        for every ``threads``."""
        texts, _ = check_texts(texts, None, self.kind)
        texts = list(texts)
        if texts and max(map(len, texts)) > STREAM_CHARS:  # a long text span by span, as encode does
            short = iter(self.encode_batch([t for t in texts if len(t) <= STREAM_CHARS], threads=threads))
            return [self._content(t, None) if len(t) > STREAM_CHARS else next(short) for t in texts]
        out = []
        for ids, offsets in self._encode_chunks(texts, None, threads, False):
            bounds = offsets.tolist()
            out.extend(ids[a:b] for a, b in zip(bounds, bounds[1:]))
        return out

    def encode_documents(self, texts: Sequence[str], document_ids: Sequence[str] | None = None,
                         *, threads: int = 1, progress=None, stream_chars: int = STREAM_CHARS,
                         piece_chars: int = PIECE_CHARS) -> tuple[np.ndarray, np.ndarray]:
        """``(values uint32, offsets int64)`` of the wrapped documents ``[BOS, ids..., EOS]``; a document
        longer than ``stream_chars`` characters is encoded span by span (``engine.tokenizers.streaming``;
        spans of at most ``piece_chars`` characters; ``progress(nbytes)`` per span)."""
        texts, document_ids = check_texts(texts, document_ids, self.kind)
        return encode_streaming(self, list(texts), document_ids,
                                lambda part, ids: self._encode_wrapped(part, ids, threads), progress, stream_chars,
                                piece_chars)

    def _span(self, window: str, pos: int, document_id: str | None, final: bool):
        """(characters of ``window`` to encode on their own, their UTF-8 bytes); see ``streaming``."""
        return byte_level_span(window, pos, document_id, final, self._pattern_code)

    def _encode_span(self, data: np.ndarray, document_id: str | None, pos: int) -> tuple[np.ndarray, int]:
        ids, _ = self._run(data, np.array([0, data.shape[0]], dtype=np.int64), False)
        return ids.copy(), int(data.shape[0])

    def _encode_wrapped(self, texts: list[str], document_ids, threads: int) -> tuple[np.ndarray, np.ndarray]:
        results = self._encode_chunks(texts, document_ids, threads, True)
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        at, base = 0, 0
        for ids, chunk_offsets in results:
            n = chunk_offsets.shape[0] - 1
            offsets[at + 1:at + n + 1] = chunk_offsets[1:] + base
            at, base = at + n, base + ids.shape[0]
        values = np.concatenate([ids for ids, _ in results]) if results else np.empty(0, dtype=np.uint32)
        return values, offsets

    # -- decoding -----------------------------------------------------------------------------
    def decode_bytes(self, ids: Sequence[int] | np.ndarray) -> bytes:
        ids = check_ids(ids, self._size, self.kind)
        starts, ends = self._token_offsets[ids], self._token_offsets[ids + 1]
        pool = self._token_pool.tobytes()
        return b"".join(pool[s:e] for s, e in zip(starts.tolist(), ends.tolist()))

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        data = self.decode_bytes(ids)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TokenizerError(f"decoded bytes are not valid UTF-8 at byte {exc.start} "
                                 "(use decode_bytes for partial sequences)") from None

    def tokenize(self, text: str) -> list[str]:
        """Pieces in GPT-2's printable byte alphabet (a space shows as ``Ġ``), as tokenizer.json writes them."""
        table = bytes_to_unicode()
        return ["".join(table[b] for b in self.tokens[i]) for i in self.encode(text).tolist()]

    @property
    def vocab_size(self) -> int:
        return self._size

    # -- file format --------------------------------------------------------------------------
    def _payload(self) -> dict:
        return {
            "pattern": self.pattern,
            "tokens": [None if t is None else b2a_base64(t, newline=False).decode("ascii") for t in self.tokens],
            "merges": None if self.merges is None else [list(m) for m in self.merges],
            "specials": dict(sorted(self.specials.items(), key=lambda kv: kv[1])),
            "bos": self.bos,
            "eos": self.eos,
            "whole_piece_first": self.whole_piece_first,
        }

    @classmethod
    def _from_payload(cls, payload: dict) -> "ByteBpeTokenizer":
        # Checked, never coerced: a file whose values have other types is refused (its hash matching
        # only says it is as written, not that engine wrote it).
        tokens = payload["tokens"]
        if not isinstance(tokens, list) or not all(t is None or isinstance(t, str) for t in tokens):
            raise TokenizerError('"tokens" must be a list of base64 strings (null for a special token\'s slot)')
        tokens = [None if t is None else base64.b64decode(t, validate=True) for t in tokens]
        merges = payload.get("merges")
        if merges is not None:
            if not isinstance(merges, list) or not all(isinstance(m, list) and len(m) == 2 for m in merges):
                raise TokenizerError('"merges" must be a list of [left id, right id] pairs')
            merges = [(check_file_id(a, f"merge {i}"), check_file_id(b, f"merge {i}")) for i, (a, b) in enumerate(merges)]
        for name in ("bos", "eos"):
            if not isinstance(payload[name], str):
                raise TokenizerError(f'"{name}" must be the name of a special token, got {payload[name]!r:.40}')
        if not isinstance(payload["whole_piece_first"], bool):
            raise TokenizerError(f'"whole_piece_first" must be true or false, got {payload["whole_piece_first"]!r:.40}')
        return cls(
            tokens,
            merges=merges,
            specials=check_special_ids(payload["specials"]),
            pattern=payload["pattern"],
            bos=payload["bos"],
            eos=payload["eos"],
            whole_piece_first=payload["whole_piece_first"],
        )


class ByteBpeTrainer:
    """Trains byte-level BPE on any iterable of texts (streamed in batches of ``limits.batch_bytes``,
    4 MB by default; a text longer than ``limits.stream_chars`` counted span by span: ``TrainLimits``).

    Words are the pre-tokenizer's pieces, counted as types (int64 counts, numbered by first
    appearance); merges then run incrementally in ``engine.kernels.bpe_train`` (the kernel of
    character-level BPE, over symbols that start as the 256 bytes). ``train_from_counts`` trains
    on a word-type table counted elsewhere (e.g. folded from several machines).

    ``vocab_size`` counts everything: the specials, the 256 bytes and one id per new token, so
    the default specials leave ``vocab_size - 258`` new tokens (fewer only if pairs run out).
    ``merges`` caps the number of merges instead; either or both may be given. A merge whose
    bytes equal an existing token reuses that token's id, as Hugging Face does.

    ``tie_break="first"``: among equally frequent pairs, the one occurring first (rank of the word
    type's first appearance, then byte offset in the word). ``tie_break="hf"``: the smaller pair
    in Hugging Face ``tokenizers``' ids (bytes ordered by their GPT-2 printable character, new
    tokens by creation), which reproduces its BpeTrainer's merge list.
    """

    def __init__(self, merges: int | None = None, *, vocab_size: int | None = None, pattern: str = "gpt2",
                 tie_break: str = "first", special_tokens: Sequence[str] = ("<bos>", "<eos>"),
                 limits: TrainLimits = TrainLimits()):
        if not isinstance(limits, TrainLimits):
            raise TokenizerError(f"limits is {type(limits).__name__}; expected a TrainLimits")
        self.limits = limits  # how count_words cuts its texts: stream_chars, batch_bytes
        pattern = canonical_pattern(pattern)
        if tie_break not in ("first", "hf"):
            raise TokenizerError(f"unknown tie_break {tie_break!r} (expected 'first' or 'hf')")
        special_tokens = tuple(special_tokens)
        if not special_tokens or len(set(special_tokens)) != len(special_tokens):
            raise TokenizerError(f"special_tokens {special_tokens!r}: expected at least one, all distinct")
        if merges is None and vocab_size is None:
            raise TokenizerError("give merges=N or vocab_size=V (the vocabulary size, specials and bytes included)")
        if merges is not None:
            merges = check_count(merges, "merges")
        if vocab_size is not None:
            vocab_size = check_count(vocab_size, "vocab_size")
        for name, value in (("merges", merges), ("vocab_size", vocab_size)):
            if value is not None and value > MAX_VOCAB_SIZE:
                raise TokenizerError(f"{name}={value} is more than a vocabulary holds (at most {MAX_VOCAB_SIZE} ids)")
        if vocab_size is not None and vocab_size < len(special_tokens) + 256:
            raise TokenizerError(
                f"vocab_size={vocab_size} is smaller than the {len(special_tokens)} specials plus 256 bytes "
                f"(expected >= {len(special_tokens) + 256})")
        self.merges, self.vocab_size, self.pattern = merges, vocab_size, pattern
        self.tie_break, self.special_tokens = tie_break, special_tokens
        self.code = pattern_code(pattern)
        self.history: list[int] = []
        self.initial_tokens = 0

    def count_words(self, texts: Iterable[str] | str) -> "WordCounts":
        """Word types of ``texts`` with their counts, streamed batch by batch."""
        counts = WordCounts(self.pattern)
        batch, size = [], 0
        for index, text in enumerate(_iter_texts(texts)):
            if not isinstance(text, str):
                raise TokenizerError(f"training text #{index}: expected str, got {type(text).__name__}")
            if len(text) > self.limits.stream_chars:  # spans; a piece with no break in them counted in parts
                for span in fit_texts(self, [text], self.limits.stream_chars):
                    counts.add([utf8_bytes(span, index, "training text")])
                continue
            data = utf8_bytes(text, index, "training text")
            batch.append(data)
            size += len(data)
            if size >= self.limits.batch_bytes:
                counts.add(batch)
                batch, size = [], 0
        counts.add(batch)
        return counts

    def span(self, window: str, pos: int, final: bool) -> tuple[int, str]:
        """Where a long training text may be cut (``engine.tokenizers.streaming``)."""
        return byte_level_text_span(window, pos, final, self.code)

    def count_types(self, texts: Sequence[str]) -> tuple[list[bytes], np.ndarray]:
        """Distinct pieces of one batch (``bytes``, first appearance) and their int64 counts."""
        table = self.count_words(texts)
        pool, starts = table.pool.tobytes(), table.starts[: table.total + 1].tolist()
        return [pool[starts[w]:starts[w + 1]] for w in range(table.total)], table.counts[: table.total].copy()

    def train(self, texts: Iterable[str] | str) -> ByteBpeTokenizer:
        words = self.count_words(texts)
        total = words.total
        return self._train_words(words.pool, words.starts[: total + 1], words.counts[:total])

    def train_from_table(self, table) -> ByteBpeTokenizer:
        """``train_from_counts`` on a ``engine.tokenizers.type_table.TypeCounts`` of bytes types, read
        from its arrays (no Python object per type)."""
        if table.text:
            raise TokenizerError("train_from_table: byte-level BPE counts bytes types, the table holds text")
        return self._train_words(table.pool, table.starts, table.counts())

    def train_from_counts(self, words: Sequence[bytes], counts: Sequence[int] | np.ndarray) -> ByteBpeTokenizer:
        """Train on word types (pre-tokenizer pieces as ``bytes``, numbered by first appearance) and
        their counts, as ``train`` does on the texts they were counted from: same merges, ids and history."""
        words = list(words)
        counts = np.asarray(counts)
        if counts.ndim != 1 or (counts.size and counts.dtype.kind not in "iu"):
            raise TokenizerError(f"train_from_counts: counts must be one integer per word, got {counts.dtype} "
                                 f"of shape {counts.shape}")
        counts = counts.astype(np.int64)
        if len(words) != counts.shape[0]:
            raise TokenizerError(f"train_from_counts: {len(words)} words but {counts.shape[0]} counts (expected one per word)")
        for i, word in enumerate(words):
            if not isinstance(word, (bytes, bytearray)) or not word:
                raise TokenizerError(f"train_from_counts: word #{i} is {word!r:.40}, expected non-empty bytes")
        if counts.shape[0] and counts.min() < 1:
            raise TokenizerError(f"train_from_counts: count {int(counts.min())} is below 1 (expected counts >= 1)")
        starts = np.zeros(len(words) + 1, dtype=np.int64)
        np.cumsum(np.fromiter((len(w) for w in words), dtype=np.int64, count=len(words)), out=starts[1:])
        return self._train_words(np.frombuffer(b"".join(words), dtype=np.uint8), starts, counts)

    def _train_words(self, pool: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> ByteBpeTokenizer:
        """Merges of word types ``pool[starts[w]:starts[w+1]]`` weighted by ``counts`` (int64)."""
        specials = len(self.special_tokens)
        max_new = (self.vocab_size - specials - 256) if self.vocab_size is not None else self.merges
        max_merges = self.merges if self.merges is not None else 2 * max_new + 1024
        # Each merge shortens some word type by one symbol: no run merges more than bytes minus types,
        # so the arrays are sized by the data, whatever merges / vocab_size asked for.
        limit = max(int(pool.shape[0]) - (int(starts.shape[0]) - 1), 0)
        max_new, max_merges = min(max_new, limit), min(max_merges, limit)
        left, right, merged = (np.empty(max(max_merges, 1), dtype=np.int64) for _ in range(3))
        history = np.empty(max_merges + 1, dtype=np.int64)
        # Kernel symbol s < 256 is the byte ranked s-th by its GPT-2 printable character, which is
        # Hugging Face's id order, so the "hf" rule is the kernel's smaller (left, right).
        table = bytes_to_unicode()
        ranked = np.array(sorted(range(256), key=lambda b: ord(table[b])), dtype=np.int64)
        symbol_of_byte = np.empty(256, dtype=np.int64)
        symbol_of_byte[ranked] = np.arange(256)
        total, _ = train_merges(
            symbol_of_byte[pool[: starts[-1]]], starts, counts, ranked.astype(np.uint32),
            TIE_HF if self.tie_break == "hf" else TIE_FIRST, max_merges, max_new, left, right, merged, history)
        left, right, merged = (np.where(a[:total] < 256, ranked[np.minimum(a[:total], 255)], a[:total]).tolist()
                               for a in (left, right, merged))
        tokens: list[bytes | None] = [None] * specials + [bytes([b]) for b in range(256)]
        for a, b, t in zip(left, right, merged):
            if t + specials == len(tokens):  # a new token (not the bytes of an existing one)
                tokens.append(tokens[a + specials] + tokens[b + specials])
        self.history = history[1: total + 1].tolist()
        self.initial_tokens = int(history[0])
        names = self.special_tokens
        return ByteBpeTokenizer(
            tokens,
            merges=[(a + specials, b + specials) for a, b in zip(left, right)],
            specials={name: i for i, name in enumerate(names)},
            pattern=self.pattern,
            bos="<bos>" if "<bos>" in names else names[0],
            eos="<eos>" if "<eos>" in names else names[-1],
        )


class WordCounts:
    """Word types (bytes in ``pool[starts[w]:starts[w+1]]``) and int64 ``counts``, grown batch by batch."""

    def __init__(self, pattern: str):
        self.code = pattern_code(pattern)
        self.slots = np.zeros((1 << 16, 2), dtype=np.uint64)  # (piece key, word); key 0 = free
        self.keys = np.empty(1 << 15, dtype=np.uint64)
        self.starts = np.zeros((1 << 15) + 1, dtype=np.int64)
        self.counts = np.empty(1 << 15, dtype=np.int64)
        self.pool = np.empty(1 << 20, dtype=np.uint8)
        self.total = 0
        self.pool_used = 0
        self.total_bytes = 0

    def add(self, batch: list[bytes]) -> None:
        if not batch:
            return
        buf = np.frombuffer(b"".join(batch), dtype=np.uint8)
        offsets = np.zeros(len(batch) + 1, dtype=np.int64)
        np.cumsum([len(d) for d in batch], out=offsets[1:])
        ends = np.empty(buf.shape[0], dtype=np.int64)
        pieces = pretokenize_ends(buf, offsets, code_point_classes(), self.code, ends)
        ends = ends[:pieces]
        self.total_bytes += buf.shape[0]
        piece, start = 0, 0
        while True:
            piece, start, self.total, self.pool_used = count_pieces(
                buf, ends, piece, start, self.slots, self.keys, self.starts, self.pool,
                self.counts, self.total, self.pool_used)
            if piece >= pieces:
                return
            self._grow(buf.shape[0] - start)

    def _grow(self, pending_bytes: int) -> None:
        if self.total + 1 >= min(self.counts.shape[0], self.slots.shape[0] // 2):
            size = 2 * self.counts.shape[0]
            self.keys = np.concatenate([self.keys, np.empty(size - self.keys.shape[0], dtype=np.uint64)])
            self.counts = np.concatenate([self.counts, np.empty(size - self.counts.shape[0], dtype=np.int64)])
            self.starts = np.concatenate([self.starts, np.zeros(size + 1 - self.starts.shape[0], dtype=np.int64)])
            self.slots = np.zeros((2 * size, 2), dtype=np.uint64)
            rehash_words(self.slots, self.keys, self.total)
        if self.pool_used + pending_bytes > self.pool.shape[0]:
            size = max(2 * self.pool.shape[0], self.pool_used + pending_bytes)
            self.pool = np.concatenate([self.pool, np.empty(size - self.pool.shape[0], dtype=np.uint8)])
