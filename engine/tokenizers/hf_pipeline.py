"""Hugging Face ``tokenizer.json`` BPE pipelines: the frozen tokenizer (kind ``"hf-bpe"``) and its loader.

``encode(text)`` gives exactly the ids of Hugging Face ``tokenizers``
``Tokenizer.encode(text, add_special_tokens=False)`` with ``encode_special_tokens = True``: the text
of a *special* added token inside a document is ordinary text (a corpus cannot inject control
tokens), non-special added tokens are always matched. ``encode_with_specials(text)`` (or a
tokenizer built with ``match_special=True``) matches special tokens too, as Hugging Face does by
default: rendered chat templates need it. The order is Hugging Face's:

1. added tokens are split out of the text (``hf_components.AddedVocabulary``), the ones with
   ``normalized: false`` first;
2. every remaining part is normalized, then its ``normalized: true`` added tokens are split out;
3. the pre-tokenizer steps cut each part into pieces (``engine.kernels.hf_split``; see
   ``hf_components`` for each component), on the part's UTF-8 bytes;
4. the ``BPE`` model merges each piece (``engine.kernels.hf_bpe``): over bytes when a ``ByteLevel``
   step mapped the text and the vocabulary holds the 256 byte characters, else over characters
   (``byte_fallback``: ``<0xXX>`` tokens; ``unk_token`` and ``fuse_unk``; ``ignore_merges``: a
   piece that is itself a token is that token). Merges are ranked by their position in the file
   (a pair listed twice keeps its last rank, as Hugging Face's map does).

Model options ``dropout`` (other than null or 0), ``continuing_subword_prefix`` and
``end_of_word_suffix`` are refused by name, as is any component ``hf_components`` does not list.
``Metaspace`` with ``prepend_scheme: first`` is refused after a ``Strip``, ``Prepend`` or
``Replace`` normalizer (Hugging Face then decides "first" from alignments these rules do not keep).

Documents are wrapped by the tokens the caller names (``bos=`` and ``eos=``: both, neither, or
``eos`` alone for a file without BOS), else by the file's. ``default_bos`` is none when
``tokenizer_config.json`` says ``add_bos_token: false``, else the ``bos_token`` it names (``null``:
none, as Qwen's; one the file lacks counts only with ``add_bos_token: true``, which then fails),
else the special token the ``post_processor`` writes before a text (none: the tokenizer adds no
BOS, as a Qwen or StarCoder file alone). ``default_eos`` is the ``eos_token`` of
``tokenizer_config.json`` / ``special_tokens_map.json``, else the token the ``post_processor`` writes
after a text, else a conventional end token among the specials (``<|endoftext|>``, ``</s>``,
``<eos>``, ``<|end_of_text|>``, DeepSeek's ``<｜end▁of▁sentence｜>``, ``<EOS_TOKEN>``, ``<EOT>``: the
first of these the file has), else the only special token. Without a BOS the tokenizer has none
(``bos_id`` None) and documents are ``[content..., EOS]``; with a BOS but no end token, the BOS ends
them too. A file with no special token to end documents with gets ``<|endoftext|>`` after its last
id (also when a saved file names it). ``decode(ids)`` runs the file's decoder (special
tokens decode to nothing), so ``decode(encode(t))`` is ``t`` as normalized, byte for byte.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from engine.checks import JSONLimitError, parse_json
from engine.errors import TokenizerError
from engine.kernels.bpe_encode import build_pair_table, build_piece_table, new_piece_cache, self_merging_tokens
from engine.kernels.bpe_merge import first_entry_table, merge_long_pieces
from engine.kernels.hf_bpe import (ascii_cuts, build_pair_set, build_span_table, cut_pieces,
                                   char_scratch, encode_byte_pieces, encode_char_pieces, new_char_cache)
from engine.tokenizers.base import MAX_VOCAB_SIZE, Tokenizer, check_file_id, check_ids, register_tokenizer
from engine.tokenizers.byte_bpe import bytes_to_unicode
from engine.tokenizers.interop import _added_tokens, load_hf_tokenizer_json, load_tekken, looks_like_tekken
from engine.tokenizers.hf_components import (AddedToken, AddedVocabulary, build_decoder, build_normalizer,
                                             parse_pre_tokenizer, post_processor_wrappers, space_normalizer)
from engine.tokenizers.hf_steps import replaced_code_points, run_steps, whole_code_points
from engine.tokenizers.pretokenize import utf8_bytes

__all__ = ["HfBpeTokenizer", "load_hf_pipeline", "load_hf_file", "is_hf_file", "read_model_folder", "encode_with_specials"]

ENDOFTEXT = "<|endoftext|>"
# Conventional end tokens, in order of preference: GPT-2 / Qwen / Phi, Llama 2 / Mistral, Gemma, Llama 3,
# DeepSeek, Command-R, Anthropic's.
_END_TOKENS = (ENDOFTEXT, "</s>", "<eos>", "<|end_of_text|>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "<EOS_TOKEN>",
               "<EOT>")
_NO_BOOL = object()


def _power_of_two_at_least(n: int) -> int:
    size = 16
    while size < n:
        size <<= 1
    return size


def _token_name(value) -> str | None:
    """A token named in tokenizer_config.json: a string, ``{"content": ...}`` or null."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


@register_tokenizer
class HfBpeTokenizer(Tokenizer):
    """A ``tokenizer.json`` BPE pipeline, frozen; ``data`` is the file's JSON object."""

    kind = "hf-bpe"
    thread_safe_encode = True

    def __init__(self, data: dict, *, config: dict | None = None, bos: str | None = None, eos: str | None = None,
                 match_special: bool = False, source: str = "tokenizer.json"):
        if not isinstance(data, dict):
            raise TokenizerError(f"{source}: expected a JSON object with a \"model\", got {type(data).__name__}")
        self.data, self.config, self.match_special = data, dict(config or {}), bool(match_special)
        self.source = source
        self._read_model(data.get("model"), source)
        self.normalize, normalizers = build_normalizer(data.get("normalizer"), source)
        self._read_added(data.get("added_tokens"), source)
        self.steps = parse_pre_tokenizer(data.get("pre_tokenizer"), source)
        if any(s[0] == "metaspace" and s[2] == "first" for s in self.steps):
            clash = [k for k in normalizers if k in ("Strip", "Prepend", "Replace")]
            if clash:
                raise TokenizerError(f"{source}: Metaspace prepend_scheme 'first' after a {clash[0]} normalizer is "
                                     "not supported (expected no Strip, Prepend or Replace normalizer with it)")
        self.added = AddedVocabulary(self.added_tokens, self.normalize)
        # Llama 2's normalizers, with nothing to match in their output and no pre-tokenizer: done on the
        # code points, which the merges take anyway (spaces_replaced), not on the string
        spaces = space_normalizer(data.get("normalizer"))
        self._space_normalizer = spaces if spaces and not self.steps and not self.added.in_normalized else None
        self._decoder = build_decoder(data.get("decoder"), source)
        self._choose_wrappers(bos, eos, source)
        self._byte_level = any(s[0] == "bytelevel" for s in self.steps) and self._build_byte_tables()
        if not self._byte_level:
            self._build_char_tables()

    # -- reading ------------------------------------------------------------------------------
    def _read_model(self, model, source: str) -> None:
        if not isinstance(model, dict) or model.get("type", "BPE") != "BPE" or "vocab" not in model:
            kind = model.get("type") if isinstance(model, dict) else None
            raise TokenizerError(f"{source}: model {kind!r} is not supported (expected a \"model\" of type \"BPE\")")
        if model.get("dropout") not in (None, 0, 0.0):
            raise TokenizerError(f"{source}: BPE option dropout={model['dropout']!r} is not supported (expected null)")
        for option in ("continuing_subword_prefix", "end_of_word_suffix"):
            if model.get(option):
                raise TokenizerError(f"{source}: BPE option {option}={model[option]!r} is not supported (expected null)")
        vocab, merges = model.get("vocab"), model.get("merges", [])
        if not isinstance(vocab, dict) or not isinstance(merges, list):
            raise TokenizerError(f"{source}: model needs a \"vocab\" object and a \"merges\" list")
        if not vocab:
            raise TokenizerError(f"{source}: the model's \"vocab\" is empty")
        owner: dict[int, str] = {}
        for text, value in vocab.items():
            i = check_file_id(value, f"{source}: vocab token {text!r:.40}")
            if i in owner:
                raise TokenizerError(f"{source}: vocab tokens {owner[i]!r:.40} and {text!r:.40} share id {i}")
            owner[i] = text
        self.vocab: dict[str, int] = dict(vocab)
        ranks: dict[tuple[int, int], int] = {}
        for k, merge in enumerate(merges):
            parts = merge.split(" ") if isinstance(merge, str) else merge
            if not isinstance(parts, list) or len(parts) != 2 or not all(isinstance(p, str) and p in vocab for p in parts):
                raise TokenizerError(f"{source}: merge {k} {merge!r}: expected two vocabulary tokens")
            if parts[0] + parts[1] not in vocab:
                raise TokenizerError(f"{source}: merge {k} {merge!r} makes {parts[0] + parts[1]!r}, which is not in "
                                     "the vocabulary")
            ranks[(vocab[parts[0]], vocab[parts[1]])] = k  # a pair listed twice keeps its last rank
        self.merge_ranks = ranks
        self.byte_fallback = bool(model.get("byte_fallback"))
        self.fuse_unk = bool(model.get("fuse_unk"))
        self.ignore_merges = bool(model.get("ignore_merges"))
        unk = model.get("unk_token")
        if unk is not None and unk not in vocab:
            raise TokenizerError(f"{source}: unk_token {unk!r} is not in the vocabulary")
        self.unk_id = -1 if unk is None else vocab[unk]

    def _read_added(self, added_tokens, source: str) -> None:
        if added_tokens is None:
            added_tokens = []
        try:
            _added_tokens(added_tokens)  # objects with a content and an id, none twice
        except TokenizerError as exc:
            raise TokenizerError(f"{source}: {exc}") from None
        tokens: list[AddedToken] = []
        for item in added_tokens:
            i = int(item["id"])
            special = bool(item.get("special", False))
            tokens.append(AddedToken(i, item["content"], special, bool(item.get("normalized", not special)),
                                     bool(item.get("single_word")), bool(item.get("lstrip")), bool(item.get("rstrip"))))
        self.added_tokens = tokens
        self.specials = {t.content: t.id for t in tokens if t.special}
        size = max([*self.vocab.values(), *(t.id for t in tokens), -1]) + 1
        names: list[str | None] = [None] * size
        for text, i in self.vocab.items():
            names[i] = text
        for t in tokens:  # decoded in their normalized spelling, as Hugging Face decodes them
            names[t.id] = self.normalize(t.content) if t.normalized and self.normalize is not None else t.content
        self.id_to_token = names
        self._special_ids = np.zeros(size, dtype=np.bool_)
        self._special_ids[[t.id for t in tokens if t.special]] = True

    def _choose_wrappers(self, bos: str | None, eos: str | None, source: str) -> None:
        pp_bos, pp_eos = post_processor_wrappers(self.data.get("post_processor"), source)
        config = self.config
        add_bos, named_bos = config.get("add_bos_token", _NO_BOOL), _token_name(config.get("bos_token"))
        if add_bos is False:
            default_bos = None
        elif add_bos is True or ("bos_token" in config and (named_bos is None or named_bos in self.id_to_token)):
            default_bos = named_bos
        else:  # no config, or one whose bos_token the file does not hold: the post_processor's
            default_bos = pp_bos
        default_eos = _token_name(config.get("eos_token")) or pp_eos
        if default_eos is None:
            default_eos = next((t for t in _END_TOKENS if t in self.specials), None)
        if default_eos is None and len(self.specials) == 1:
            default_eos = next(iter(self.specials))
        notes: list[str] = []
        if default_eos is None and default_bos is None and (bos, eos) in ((None, None), (None, ENDOFTEXT),
                                                                          (ENDOFTEXT, ENDOFTEXT)):
            # like a tiktoken rank file: documents need an end token (also when a saved file names it)
            self.extra_token = len(self.id_to_token)
            self.id_to_token.append(ENDOFTEXT)
            self._special_ids = np.append(self._special_ids, True)
            self.specials[ENDOFTEXT] = self.extra_token
            default_eos = ENDOFTEXT
            if self.specials.keys() - {ENDOFTEXT}:
                notes.append(f"none of the file's {len(self.specials) - 1} special tokens is a conventional end token "
                             f"({', '.join(_END_TOKENS[:4])}...): {ENDOFTEXT} added as id {self.extra_token}, "
                             "ending every document (--bos/--eos name the file's own)")
            else:
                notes.append(f"the file names no special tokens: {ENDOFTEXT} added as id {self.extra_token}, "
                             "ending every document")
        else:
            self.extra_token = None
        self.default_bos, self.default_eos = default_bos, default_eos
        if bos is not None and eos is None:
            raise TokenizerError(f"{source}: bos token {bos!r} given without eos: name both (CLI: --bos and --eos; the "
                                 f"same token twice, e.g. --bos {bos!r} --eos {bos!r}, wraps documents GPT-2 style)")
        if bos is None and eos is not None and default_bos is not None:
            raise TokenizerError(f"{source}: eos token {eos!r} given without bos: name both (CLI: --bos and --eos; "
                                 f"the file's own BOS is {default_bos!r}; --bos none stores no BOS)")
        if eos is None:
            bos, eos = default_bos, default_eos
            if eos is None:  # a BOS but no end token: the BOS ends documents too
                eos = bos
            if bos is None:
                notes.append(f"the tokenizer adds no BOS token: documents are [content..., {eos!r}]")
        ids = {name: i for i, name in enumerate(self.id_to_token) if name is not None}
        for name, value in (("bos", bos), ("eos", eos)):
            if value is not None and value not in ids:
                raise TokenizerError(f"{source}: {name} token {value!r} is not a token of the file")
        self.bos, self.eos = bos, eos
        self.bos_id, self.eos_id = (None if bos is None else ids[bos]), ids[eos]
        self.notes = tuple(notes)

    # -- model tables -------------------------------------------------------------------------
    def _merge_columns(self, keep) -> tuple[np.ndarray, ...]:
        lefts, rights, made, priorities = [], [], [], []
        for (a, b), rank in sorted(self.merge_ranks.items(), key=lambda kv: kv[1]):
            if keep(a) and keep(b):
                lefts.append(a), rights.append(b), priorities.append(rank)
                made.append(self.vocab[self.id_to_model[a] + self.id_to_model[b]])
        return tuple(np.asarray(c, dtype=np.int64) for c in (lefts, rights, made, priorities))

    def _build_byte_tables(self) -> bool:
        """Tables of the byte encoder, or False when the vocabulary lacks one of the 256 byte characters."""
        table = bytes_to_unicode()
        to_byte = {c: b for b, c in table.items()}
        self.id_to_model = {i: t for t, i in self.vocab.items()}
        if not all(table[b] in self.vocab for b in range(256)):
            return False
        size = len(self.id_to_token)
        tokens: list[bytes | None] = [None] * size
        for text, i in self.vocab.items():
            if all(c in to_byte for c in text):
                tokens[i] = bytes(to_byte[c] for c in text)
        self._byte_ids = np.array([self.vocab[table[b]] for b in range(256)], dtype=np.int64)
        lengths = np.array([0 if t is None else len(t) for t in tokens], dtype=np.int64)
        self._token_offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(lengths, out=self._token_offsets[1:])
        self._token_pool = np.frombuffer(b"".join(t for t in tokens if t is not None), dtype=np.uint8)
        entries = self._merge_columns(lambda i: tokens[i] is not None)
        pairs, nexts = build_pair_table(entries[0], entries[1])
        self._merge_table = (pairs, nexts, *entries[2:])
        self._first = first_entry_table(pairs, entries[2], entries[3])
        if self.ignore_merges:
            wanted = lengths >= 2
        else:
            wanted = self_merging_tokens(self._token_pool, self._token_offsets, self._byte_ids, pairs, nexts,
                                         *entries)
        self._piece_table = np.zeros((_power_of_two_at_least(2 * int(wanted.sum()) + 1), 2), dtype=np.uint64)
        build_piece_table(self._token_pool, self._token_offsets, wanted, self._piece_table)
        self._piece_caches: list = []
        self._mapped_cps = np.array([ord(table[b]) for b in range(256)], dtype=np.uint32)
        return True

    def _build_char_tables(self) -> None:
        self.id_to_model = {i: t for t, i in self.vocab.items()}
        singles = {ord(t): i for t, i in self.vocab.items() if len(t) == 1}
        self._char_ids = np.full(max(singles, default=0) + 1, -1, dtype=np.int64)
        for c, i in singles.items():
            self._char_ids[c] = i
        self._fallback_ids = np.array([self.vocab.get(f"<0x{b:02X}>", -1) for b in range(256)], dtype=np.int64)
        entries = self._merge_columns(lambda i: True)
        pairs, nexts = build_pair_table(entries[0], entries[1])
        self._merge_table = (pairs, nexts, *entries[2:])
        self._first = first_entry_table(pairs, entries[2], entries[3])
        whole = [(t, i) for t, i in self.vocab.items() if len(t) >= 2] if self.ignore_merges else []
        pool = "".join(t for t, _ in whole).encode("utf-32-le")
        self._whole_pool = np.frombuffer(pool, dtype=np.uint32) if pool else np.zeros(0, dtype=np.uint32)
        self._whole_offsets = np.zeros(len(whole) + 1, dtype=np.int64)
        np.cumsum(np.array([len(t) for t, _ in whole], dtype=np.int64), out=self._whole_offsets[1:])
        self._whole_ids = np.array([i for _, i in whole], dtype=np.int64)
        self._whole_slots = build_span_table(self._whole_pool, self._whole_offsets)
        longer = [t for t in self.vocab if len(t) >= 2]
        pool = "".join(longer).encode("utf-32-le")
        offsets = np.zeros(len(longer) + 1, dtype=np.int64)
        np.cumsum(np.array([len(t) for t in longer], dtype=np.int64), out=offsets[1:])
        self._pair_set = build_pair_set(np.frombuffer(pool, dtype=np.uint32) if pool else np.zeros(0, np.uint32),
                                        offsets)
        self._ascii_cuts = ascii_cuts(self._char_ids, self._pair_set)
        table = bytes_to_unicode()
        self._mapped_cps = np.array([ord(table[b]) for b in range(256)], dtype=np.uint32)
        self._char_caches: list = []  # idle caches of merged pieces (a call takes one: threads never share one)

    def clear_piece_caches(self) -> None:
        """Empty the caches of merged pieces (as ``ByteBpeTokenizer.clear_piece_caches``: ids never
        depend on them; the benchmarks time text the encoder has not met)."""
        for table, _, _, state in [*getattr(self, "_piece_caches", []), *getattr(self, "_char_caches", [])]:
            table.fill(0)
            state.fill(0)

    # -- encoding -----------------------------------------------------------------------------
    def _encode(self, text: str, document_id: str | None) -> np.ndarray:
        return self._encode_text(text, document_id, self.match_special)

    def encode_with_specials(self, text: str) -> np.ndarray:
        """Content ids of ``text`` with special added tokens matched as special (Hugging Face's default)."""
        if not isinstance(text, str):
            raise TokenizerError(f"{self.kind} encode_with_specials: text is {type(text).__name__}, expected str")
        return self._encode_text(text, None, True)

    def _encode_text(self, text: str, document_id: str | None, match_special: bool) -> np.ndarray:
        if not text.isascii():  # (an ASCII string holds no lone surrogate: no encoding to find one)
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                utf8_bytes(text, document_id)  # raises, naming the offset
        skip = not match_special
        parts: list[np.ndarray] = []
        for token, start, stop in self.added.split(text, False, skip):
            if token is not None:
                parts.append(np.array([token], dtype=np.uint32))
                continue
            segment = text[start:stop]
            if self._space_normalizer is not None:
                if segment:
                    prefix, replacement = self._space_normalizer
                    cps = replaced_code_points(segment, replacement, prefix)
                    parts.append(self._encode_chars(cps, np.array([cps.shape[0]], dtype=np.int64)))
                continue
            normalized = self.normalize(segment) if self.normalize is not None else segment
            for token2, s2, e2 in self.added.split(normalized, True, skip):
                if token2 is not None:
                    parts.append(np.array([token2], dtype=np.uint32))
                elif e2 > s2:
                    parts.append(self._encode_segment(normalized[s2:e2], start == 0 and s2 == 0))
        if not parts:
            return np.empty(0, dtype=np.uint32)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _encode_segment(self, text: str, first: bool) -> np.ndarray:
        pairs, nexts, made, priorities = self._merge_table
        cps = None if self._byte_level else whole_code_points(self.steps, text, first)
        if cps is not None:
            return self._encode_chars(cps, np.array([cps.shape[0]], dtype=np.int64))
        buf, ends, mapped = run_steps(self.steps, text, first, self._mapped_cps)
        if not ends.shape[0]:
            return np.empty(0, dtype=np.uint32)
        if self._byte_level:
            out = np.empty(buf.shape[0] + 1, dtype=np.uint32)
            try:
                cache = self._piece_caches.pop()  # atomic: a cache is in one call at a time
            except IndexError:
                cache = new_piece_cache(1 << 16, 1 << 19, 1 << 17)
            try:
                count, long_pieces, long_count = encode_byte_pieces(
                    buf, ends, self._byte_ids, self._first, self._piece_table, self._token_pool, self._token_offsets,
                    *cache, out)
            finally:
                self._piece_caches.append(cache)
        else:
            if mapped:
                cps, cp_ends = self._mapped_cps[buf], ends
            else:
                cps = np.frombuffer(buf.tobytes().decode("utf-8").encode("utf-32-le"), dtype=np.uint32)
                lead = np.cumsum((buf & 0xC0) != 0x80)
                cp_ends = lead[ends - 1].astype(np.int64)
            return self._encode_chars(cps, cp_ends)
        if long_count:
            count = merge_long_pieces(out, np.array([0, count], dtype=np.int64), long_pieces, long_count, 0, False,
                                      pairs, nexts, made, priorities)
        return out[:count].copy()

    def _encode_chars(self, cps: np.ndarray, cp_ends: np.ndarray) -> np.ndarray:
        """Character-level BPE of the pieces of ``cps`` (code points) ending at ``cp_ends``."""
        pairs, nexts, made, priorities = self._merge_table
        if not self.ignore_merges:
            cut = np.empty(cps.shape[0] + 1, dtype=np.int64)
            cp_ends = cut[:cut_pieces(cps, cp_ends, self._char_ids, self._pair_set, self._ascii_cuts, cut)]
        out = np.empty(4 * cps.shape[0] + 1, dtype=np.uint32)
        scratch = char_scratch(out.shape[0])
        try:
            cache = self._char_caches.pop()  # atomic: a cache is in one call at a time
        except IndexError:
            cache = new_char_cache()
        try:
            count, long_count = encode_char_pieces(
                cps, cp_ends, self._char_ids, self._fallback_ids, self.byte_fallback, self.unk_id, self.fuse_unk,
                self.ignore_merges, self._whole_pool, self._whole_offsets, self._whole_slots, self._whole_ids,
                self._first, *cache, *scratch, out)
        finally:
            self._char_caches.append(cache)
        long_pieces = scratch[-1]
        if long_count:
            count = merge_long_pieces(out, np.array([0, count], dtype=np.int64), long_pieces, long_count, 0, False,
                                      pairs, nexts, made, priorities)
        return out[:count].copy()

    # -- decoding -----------------------------------------------------------------------------
    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        ids = check_ids(ids, self.vocab_size, self.kind)
        names = self.id_to_token
        tokens = [names[i] for i in ids.tolist() if not self._special_ids[i] and names[i] is not None]
        return self._decoder(tokens)

    def tokenize(self, text: str) -> list[str]:
        """The tokens of ``text`` as the file spells them."""
        return [self.id_to_token[i] for i in self.encode(text).tolist()]

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_token)

    # -- file format --------------------------------------------------------------------------
    def _payload(self) -> dict:
        return {"tokenizer_json": self.data, "config": self.config, "bos": self.bos, "eos": self.eos,
                "match_special": self.match_special}

    @classmethod
    def _from_payload(cls, payload: dict) -> "HfBpeTokenizer":
        return cls(payload["tokenizer_json"], config=payload["config"], bos=payload["bos"], eos=payload["eos"],
                   match_special=bool(payload["match_special"]), source="tokenizer payload")

    def __reduce__(self):
        return type(self)._from_payload, (self._payload(),)


_CONFIG_KEYS = ("bos_token", "eos_token", "add_bos_token", "add_eos_token")


def read_model_folder(path: Path) -> tuple[Path, dict]:
    """``(tokenizer.json, config)`` of a model folder: the wrapper keys of ``tokenizer_config.json``,
    completed by ``special_tokens_map.json`` (either may be missing)."""
    tokenizer_json = path / "tokenizer.json"
    if not tokenizer_json.is_file():
        found = sorted(p.name for p in path.iterdir())[:8]
        raise TokenizerError(f"{path}: a model folder needs a tokenizer.json (found {found})")
    config: dict = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        file = path / name
        if not file.is_file():
            continue
        try:
            data = parse_json(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError and JSONLimitError
            raise TokenizerError(f"{file}: not valid JSON or past engine's limits ({exc})") from None
        if not isinstance(data, dict):
            raise TokenizerError(f"{file}: expected a JSON object")
        for key in _CONFIG_KEYS:
            if key in data and key not in config:
                value = data[key]
                config[key] = _token_name(value) if key in ("bos_token", "eos_token") else value
    return tokenizer_json, config


def load_hf_pipeline(path: str | os.PathLike, *, bos: str | None = None, eos: str | None = None,
                     match_special: bool = False, data: object = None) -> HfBpeTokenizer:
    """Read a ``tokenizer.json`` with a BPE model, or a model folder holding one (``data``: the file's
    parsed JSON, when the caller has it already)."""
    path = Path(path)
    config: dict = {}
    if path.is_dir():
        path, config = read_model_folder(path)
    try:
        if data is None:
            data = parse_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read tokenizer.json: {exc.strerror}") from None
    except JSONLimitError as exc:
        raise TokenizerError(f"{path}: tokenizer file is JSON past engine's limits: {exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokenizerError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("model"), dict):
        size = len(data["model"].get("vocab") or ()) + len(data.get("added_tokens") or ())
        if size > MAX_VOCAB_SIZE:
            raise TokenizerError(f"{path}: {size} tokens: expected at most {MAX_VOCAB_SIZE}")
    return HfBpeTokenizer(data, config=config, bos=bos, eos=eos, match_special=match_special, source=str(path))


def is_hf_file(data: object) -> bool:
    """True for a parsed JSON file ``load_hf_file`` reads: a Hugging Face tokenizer.json (a ``model``,
    no engine ``format``) or Mistral's tekken.json; a file whose special tokens any may wrap documents."""
    return isinstance(data, dict) and "model" in data and "format" not in data or looks_like_tekken(data)


def load_hf_file(path: str | os.PathLike, *, bos: str | None = None, eos: str | None = None,
                 data: object = None) -> Tokenizer:
    """A ``tokenizer.json`` (or model folder) as an engine tokenizer: a byte-level BPE file that
    ``interop.load_hf_tokenizer_json`` reads (GPT-2's shape, every added token special) stays a
    ``ByteBpeTokenizer``; every other file, and every model folder, is an ``HfBpeTokenizer``."""
    path = Path(path)
    if not path.is_dir():
        if data is None:  # parsed once here (a caller that parsed it passes data), not again below
            try:
                data = parse_json(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError):  # named by load_hf_pipeline below
                data = None
        if looks_like_tekken(data):  # Mistral's tekken.json: ranks, their regex and the special tokens
            return load_tekken(path, bos=bos, eos=eos, data=data)
        added = data.get("added_tokens") if isinstance(data, dict) else None
        if isinstance(added, list) and all(isinstance(t, dict) and t.get("special") for t in added):
            try:
                return load_hf_tokenizer_json(path, bos=bos, eos=eos, data=data)
            except TokenizerError:
                pass
    return load_hf_pipeline(path, bos=bos, eos=eos, data=None if path.is_dir() else data)


def encode_with_specials(tokenizer: Tokenizer, text: str) -> np.ndarray:
    """Content ids of ``text`` with the tokenizer's special tokens matched as special, for any kind:
    ``HfBpeTokenizer.encode_with_specials``; else the text is cut at each special token's text
    (leftmost, the longest at one place) and the parts between are encoded as usual."""
    own = getattr(tokenizer, "encode_with_specials", None)
    if own is not None:
        return own(text)
    if not isinstance(text, str):
        raise TokenizerError(f"{tokenizer.kind} encode_with_specials: text is {type(text).__name__}, expected str")
    specials = getattr(tokenizer, "specials", None) or {}
    names = sorted((name for name in specials if name), key=len, reverse=True)
    if not names:
        return tokenizer.encode(text)
    pattern = re.compile("|".join(map(re.escape, names)))
    parts, at = [], 0
    for match in pattern.finditer(text):
        if match.start() > at:
            parts.append(tokenizer.encode(text[at:match.start()]))
        parts.append(np.array([specials[match.group()]], dtype=np.uint32))
        at = match.end()
    if at < len(text) or not parts:
        parts.append(tokenizer.encode(text[at:]))
    return np.concatenate(parts).astype(np.uint32, copy=False)
