"""Write data/chat.jsonl: 240 small conversations (arithmetic, reversing words, counting letters),
some with a system message and two turns, deterministic (seeded), for the chat fine-tuning example."""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "data" / "chat.jsonl"
WORDS = ["river", "stone", "garden", "window", "lantern", "orange", "silver", "thunder", "meadow", "candle",
         "harbor", "pepper", "violet", "marble", "falcon", "copper"]


def task(rng: random.Random) -> tuple[str, str]:
    kind = rng.randrange(3)
    if kind == 0:
        a, b = rng.randrange(10, 100), rng.randrange(10, 100)
        return f"What is {a} + {b}?", f"{a} + {b} = {a + b}."
    word = rng.choice(WORDS)
    if kind == 1:
        return f"Reverse the word {word}.", f"{word} reversed is {word[::-1]}."
    letter = rng.choice(sorted(set(word)))
    return f"How many times does {letter} occur in {word}?", f"{letter} occurs {word.count(letter)} time(s) in {word}."


def main() -> None:
    rng = random.Random(26)
    lines = []
    for i in range(240):
        messages = []
        if i % 3 == 0:
            messages.append({"role": "system", "content": "You answer in one short sentence."})
        for _ in range(1 + (i % 4 == 0)):
            question, answer = task(rng)
            messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        lines.append(json.dumps({"id": f"chat-{i:03d}", "messages": messages}, ensure_ascii=False))
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(lines)} conversations")


if __name__ == "__main__":
    main()
