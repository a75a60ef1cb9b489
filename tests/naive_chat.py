"""Plain twin of engine.chat.encode: one conversation at a time, per-token character positions
(``tokenize_rendered``) and the flag rules written out token by token."""

from __future__ import annotations

import numpy as np


def encode_conversation(encoder, messages: list[dict], where: str = "c", flagged_from: int = 0):
    """(ids, roles) by the rules of engine.chat.encode, one token at a time."""
    template = encoder.template
    text, generation = template.render(messages, where)
    ids, starts, ends, special = encoder.tokenize_rendered(text)
    roles = [0] * len(ids)
    if encoder.train_on == "all":
        return ids, np.ones(len(ids), np.uint8)
    if template.has_generation:
        after = sum(1 for m in messages[flagged_from:] if m.get("role") == "assistant")
        spans = generation[len(generation) - min(after, len(generation)):] if flagged_from else generation
        if encoder.train_on == "last-assistant":
            spans = spans[-1:]
        for k in range(len(ids)):
            roles[k] = int(any(starts[k] < b and ends[k] > a for a, b in spans))
        return ids, np.array(roles, np.uint8)
    spans = [span for i, span in template.content_spans(messages, text, where) if i >= flagged_from]
    if encoder.train_on == "last-assistant":
        spans = spans[-1:]
    for a, b in spans:
        for k in range(len(ids)):
            if a <= starts[k] < b:
                roles[k] = 1
        for k in range(len(ids)):
            if special[k] and starts[k] >= b:
                roles[k] = 1
                break
    return ids, np.array(roles, np.uint8)
