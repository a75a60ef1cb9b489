"""Chat and instruction examples to token ids and role flags (1 = the model is trained to produce it).

Conversations. The tokens are the chat template's rendering (no BOS or EOS added: the template
writes what the model sees), tokenized with the rendering's special tokens as special: the text is
split on the tokenizer's added-token strings (``tokenizer.specials``), longest first at each
leftmost match, as Hugging Face tokenizers split added tokens, each found string is its one id, and
the text between is encoded as ordinary text. So the ids equal transformers'
``apply_chat_template(messages, tokenize=True)`` for the same tokenizer and template.

Role flags, per token, from character spans of the rendering:

- with ``{% generation %}`` markers: a token is flagged when its characters overlap a marked span
  (transformers' ``assistant_masks``; a token's characters are those of its bytes);
- without markers: a token is flagged when its first character lies inside an assistant message's
  content as rendered (``ChatTemplate.content_spans``), and so is the first special token that
  starts at or after that content's end (the end-of-turn token that closes the turn);
- ``train_on``: ``assistant`` (every assistant message), ``last-assistant`` (only the last
  assistant message's span), ``all`` (every token).

A conversation with no flagged token is an error (a template that renders no assistant content),
never an all-zero mask.

Prompt/completion with texts: ``[BOS?] + encode(prompt) + encode(completion) + [EOS]``, the two parts
encoded apart (nothing merges across the boundary: the model trains on the context it sees at
inference); flags 0 for BOS and prompt, 1 for completion and EOS. ``joint_differs`` tells whether
encoding the two texts joined would give other ids. With message lists, prompt and completion are
one conversation rendered by the template, and only the completion's assistant messages are flagged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from engine.chat.template import ChatTemplate, ChatTemplateError

__all__ = ["TRAIN_ON", "ChatEncoder", "EncodedExample"]

TRAIN_ON = ("assistant", "last-assistant", "all")


@dataclass(frozen=True)
class EncodedExample:
    tokens: np.ndarray  # uint32
    roles: np.ndarray  # uint8, one flag per token
    joint_differs: bool = False


class ChatEncoder:
    """Encodes conversations and prompt/completion examples with one tokenizer and template."""

    def __init__(self, tokenizer, template: ChatTemplate | None, *, train_on: str = "assistant",
                 bos_id: int | None = None, eos_id: int | None = None, limits=None):
        if train_on not in TRAIN_ON:
            raise ValueError(f"train_on={train_on!r}: expected one of {', '.join(TRAIN_ON)}")
        self.tokenizer, self.template, self.train_on = tokenizer, template, train_on
        # ``prepare``'s PrepareLimits (stream_chars, piece_chars) for the ordinary texts; None: the defaults
        self._span_limits = {} if limits is None else {"stream_chars": limits.stream_chars,
                                                       "piece_chars": limits.piece_chars}
        self.bos_id, self.eos_id = bos_id, eos_id
        specials = dict(getattr(tokenizer, "specials", {}) or {})
        self.specials = specials
        names = sorted(specials, key=len, reverse=True)
        self._split = re.compile("|".join(map(re.escape, names))) if names else None
        self._split_keep = re.compile("(" + "|".join(map(re.escape, names)) + ")") if names else None
        self._special_bytes = {name: len(name.encode("utf-8")) for name in names}
        offsets = getattr(tokenizer, "_token_offsets", None)
        if offsets is None:
            raise ChatTemplateError(f"{type(tokenizer).__name__}: chat data needs a byte-level BPE tokenizer "
                                    "(token byte lengths locate each token in the rendering)")
        self._byte_lengths = np.diff(np.asarray(offsets, dtype=np.int64))

    # -- tokens with their character spans ------------------------------------------------------
    def tokenize_rendered(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids uint32, character starts, character ends, is-special) of a rendering."""
        pieces: list[tuple[int, str, bool]] = []
        at = 0
        if self._split is not None:
            for match in self._split.finditer(text):
                if match.start() > at:
                    pieces.append((at, text[at:match.start()], False))
                pieces.append((match.start(), match.group(), True))
                at = match.end()
        if at < len(text):
            pieces.append((at, text[at:], False))
        ordinary = [p for _, p, special in pieces if not special]
        encoded = iter(self.tokenizer.encode_batch(ordinary) if ordinary else [])
        ids, starts, ends, special = [], [], [], []
        for position, piece, is_special in pieces:
            if is_special:
                ids.append(np.array([self.specials[piece]], np.uint32))
                starts.append(np.array([position], np.int64))
                ends.append(np.array([position + len(piece)], np.int64))
                special.append(np.ones(1, bool))
                continue
            piece_ids = np.asarray(next(encoded), dtype=np.uint32)
            byte_ends = np.cumsum(self._byte_lengths[piece_ids])
            byte_starts = byte_ends - self._byte_lengths[piece_ids]
            if piece.isascii():
                char_start, char_end = byte_starts, byte_ends
            else:
                data = np.frombuffer(piece.encode("utf-8", "surrogatepass"), np.uint8)
                char_of_byte = np.cumsum((data & 0xC0) != 0x80) - 1
                char_start = char_of_byte[byte_starts]
                char_end = char_of_byte[byte_ends - 1] + 1
            ids.append(piece_ids)
            starts.append(char_start + position)
            ends.append(char_end + position)
            special.append(np.zeros(piece_ids.shape[0], bool))
        if not ids:
            return (np.empty(0, np.uint32), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool))
        return np.concatenate(ids), np.concatenate(starts), np.concatenate(ends), np.concatenate(special)

    # -- conversations ------------------------------------------------------------------------
    def encode_conversation(self, messages: list[dict], where: str, *, flagged_from: int = 0) -> EncodedExample:
        """``messages`` rendered, tokenized and flagged; ``flagged_from``: assistant messages before this
        message index are context (conversational prompt/completion)."""
        values, _, roles = self.encode_many([messages], [where], [flagged_from])
        return EncodedExample(values, roles)

    # -- many conversations at once ---------------------------------------------------------------
    def encode_many(self, conversations: list[list[dict]], wheres: list[str], flagged_from: list[int] | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(values uint32, offsets int64, roles uint8)`` of many conversations: each rendered, then all
        their ordinary text encoded in one call, positions and flags computed over the chunk's bytes
        (the rules of ``encode_conversation``, byte for byte: a character lies in a span exactly when
        its bytes do)."""
        flagged_from = flagged_from or [0] * len(conversations)
        texts: list[str] = []
        spans: list[list[tuple[int, int]]] = []
        for messages, where, first in zip(conversations, wheres, flagged_from):
            text, generation = self.template.render(messages, where)
            texts.append(text)
            if self.train_on == "all":
                spans.append([])
                continue
            if self.template.has_generation:
                after = sum(1 for m in messages[first:] if m.get("role") == "assistant")
                chosen = generation[len(generation) - min(after, len(generation)):] if first else generation
            else:
                chosen = [span for i, span in self.template.content_spans(messages, text, where) if i >= first]
            spans.append(chosen[-1:] if self.train_on == "last-assistant" else chosen)
        # Pieces: ordinary texts (encoded together) and special tokens, in order.
        ordinary: list[str] = []
        piece_special: list[int] = []  # per piece: the special's id, or -1 for ordinary text
        special_bytes: list[int] = []
        pieces_per_text = np.empty(len(texts), np.int64)
        split = self._split_keep.split if self._split_keep is not None else (lambda t: [t])
        for n, text in enumerate(texts):
            parts = split(text)
            count = 0
            for j, part in enumerate(parts):
                if j % 2:
                    piece_special.append(self.specials[part])
                    special_bytes.append(self._special_bytes[part])
                    count += 1
                elif part:
                    ordinary.append(part)
                    piece_special.append(-1)
                    count += 1
            pieces_per_text[n] = count
        kinds_array = np.array(piece_special, np.int64)
        if ordinary:
            wrapped, wrapped_offsets = self.tokenizer.encode_documents(ordinary, **self._span_limits)
            keep = np.ones(wrapped.shape[0], bool)
            has_bos = self.tokenizer.bos_id is not None  # documents are [BOS, ids..., EOS], or [ids..., EOS]
            if has_bos:
                keep[wrapped_offsets[:-1]] = False
            keep[wrapped_offsets[1:] - 1] = False
            ordinary_ids = wrapped[keep]
            ordinary_counts = np.diff(wrapped_offsets) - (2 if has_bos else 1)
        else:
            ordinary_ids, ordinary_counts = np.empty(0, np.uint32), np.empty(0, np.int64)
        is_ordinary = kinds_array < 0
        counts = np.ones(kinds_array.shape[0], np.int64)
        counts[is_ordinary] = ordinary_counts
        piece_start = np.zeros(counts.shape[0] + 1, np.int64)
        np.cumsum(counts, out=piece_start[1:])
        total = int(piece_start[-1])
        values = np.empty(total, np.uint32)
        special = np.zeros(total, bool)
        starts = piece_start[:-1]
        ordinary_positions = np.repeat(starts[is_ordinary] - np.concatenate([[0], np.cumsum(ordinary_counts)[:-1]]),
                                       ordinary_counts) + np.arange(ordinary_ids.shape[0])
        values[ordinary_positions] = ordinary_ids
        special_positions = starts[~is_ordinary]
        values[special_positions] = kinds_array[~is_ordinary]
        special[special_positions] = True
        byte_lengths = np.empty(total, np.int64)
        byte_lengths[ordinary_positions] = self._byte_lengths[ordinary_ids]
        byte_lengths[special_positions] = np.array(special_bytes, np.int64)
        byte_end = np.cumsum(byte_lengths)
        byte_start = byte_end - byte_lengths
        piece_offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum(pieces_per_text, out=piece_offsets[1:])
        offsets = piece_start[piece_offsets]
        text_bytes = np.zeros(len(texts) + 1, np.int64)
        text_bytes[1:] = byte_end[offsets[1:] - 1] if total else 0
        text_bytes[1:][offsets[1:] == offsets[:-1]] = 0  # an empty rendering (refused below)
        text_bytes = np.maximum.accumulate(text_bytes)
        roles = self._flags(texts, spans, text_bytes, byte_start, byte_end, special, total)
        scored = np.add.reduceat(roles, offsets[:-1]) if total else np.zeros(len(texts), np.int64)
        scored[offsets[1:] == offsets[:-1]] = 0
        empty = np.flatnonzero(scored == 0)
        if empty.size:
            raise ChatTemplateError(f"{wheres[int(empty[0])]}: the chat template {self.template.name} renders no "
                                    "assistant content to train on (no token is flagged); expected at least one "
                                    "assistant message with content the template shows")
        return values, offsets, roles

    def _flags(self, texts, spans, text_bytes, byte_start, byte_end, special, total) -> np.ndarray:
        roles = np.zeros(total, np.uint8)
        if self.train_on == "all":
            roles[:] = 1
            return roles
        bounds = []
        for n, (text, chosen) in enumerate(zip(texts, spans)):
            if not chosen:
                continue
            if text.isascii():
                bounds.extend((text_bytes[n] + a, text_bytes[n] + b) for a, b in chosen)
            else:
                sizes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
                widths = 1 + (sizes >= 0x80) + (sizes >= 0x800) + (sizes >= 0x10000)
                at = np.zeros(len(text) + 1, np.int64)
                np.cumsum(widths, out=at[1:])
                bounds.extend((text_bytes[n] + at[a], text_bytes[n] + at[b]) for a, b in chosen)
        if not bounds:
            return roles
        span_bounds = np.array(bounds, np.int64)
        size = int(text_bytes[-1]) + 1
        marks = np.zeros(size + 1, np.int64)
        np.add.at(marks, span_bounds[:, 0], 1)
        np.add.at(marks, span_bounds[:, 1], -1)
        inside = np.cumsum(marks[:size]) > 0  # byte b lies in a span
        if self.template.has_generation:  # overlap: some byte of the token lies in a span
            prefix = np.zeros(size + 1, np.int64)
            np.cumsum(inside, out=prefix[1:])
            roles[(prefix[byte_end] - prefix[byte_start]) > 0] = 1
            return roles
        roles[inside[byte_start]] = 1  # the token's first byte lies in an assistant content
        special_at = np.flatnonzero(special)
        special_starts = byte_start[special_at]
        after = np.searchsorted(special_starts, span_bounds[:, 1], side="left")
        ends = np.searchsorted(text_bytes, span_bounds[:, 0], side="right")  # the span's text, 1-based
        valid = after < special_at.shape[0]
        valid[valid] &= special_starts[after[valid]] < text_bytes[ends[valid]]  # same conversation
        roles[special_at[after[valid]]] = 1
        return roles

    # -- prompt / completion --------------------------------------------------------------------
    def encode_prompt_completion(self, prompt: str, completion: str) -> EncodedExample:
        tok = self.tokenizer
        p, c = tok.encode(prompt), tok.encode(completion)
        head = [] if self.bos_id is None else [self.bos_id]
        tail = [] if self.eos_id is None else [self.eos_id]
        ids = np.concatenate([np.array(head, np.uint32), p, c, np.array(tail, np.uint32)]).astype(np.uint32)
        roles = np.concatenate([np.zeros(len(head) + p.shape[0], np.uint8), np.ones(c.shape[0] + len(tail), np.uint8)])
        joint = tok.encode(prompt + completion)
        differs = joint.shape[0] != p.shape[0] + c.shape[0] or not np.array_equal(joint, np.concatenate([p, c]))
        return EncodedExample(ids, roles, bool(differs))


def resolve_wrappers(tokenizer, config: dict | None, bos: str | None, eos: str | None, source: str = "tokenizer"
                     ) -> tuple[str | None, int | None, str | None, int | None]:
    """(bos token, bos id, eos token, eos id) that wrap documents: ``bos`` / ``eos`` as given (a special
    token's string, or ``"none"``), else what ``tokenizer_config.json`` names (``bos_token: null``: no
    BOS, as Qwen's), else the tokenizer's own. An id is None for "none"."""
    from engine.chat.template import _token_string

    specials = dict(getattr(tokenizer, "specials", {}) or {})
    out: list = []
    for name, given, own in (("bos", bos, getattr(tokenizer, "bos", None)), ("eos", eos, getattr(tokenizer, "eos", None))):
        own = own if own in specials else None  # a kind without special-token strings wraps with none
        if given is None:
            key = f"{name}_token"
            given = _token_string(config.get(key)) if config is not None and key in config else own
            if given is None:
                out += [None, None]
                continue
        if given == "none":
            out += [None, None]
            continue
        if given not in specials:
            raise ChatTemplateError(f"{source}: --{name} {given!r} is not a special token of the tokenizer "
                                    f"(specials: {', '.join(sorted(specials)[:12])}); expected one of them or none")
        out += [given, specials[given]]
    return tuple(out)
