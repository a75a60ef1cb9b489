"""tokenizer.json pipelines (kind ``hf-bpe``) against Hugging Face tokenizers, one row per model family.

Each family's file has exactly that family's components (tests/naive_hf.py builds them through the
``tokenizers`` API): Llama 2 (Prepend + Replace normalizer, byte fallback, one piece per text),
Mistral (Metaspace, prepended to the first piece only), Phi-3 (Llama 2's, with added tokens, one of
them ``rstrip``), Qwen2 (NFC + Split regex + ByteLevel), Llama 3 (Split regex + ByteLevel,
ignore_merges), StarCoder (Digits + ByteLevel; Refact's file has the same components), DeepSeek
(six Split regexes + ByteLevel), DeepSeek Coder (five Split regexes + ByteLevel), Falcon
(Punctuation, ByteLevel, Digits, Split regex), MPT (NFC + ByteLevel), Command-R (NFC + ByteLevel
with a prefix space), GPT-2 (ByteLevel, with an added token, so the file is a pipeline and not
engine's own byte-level kind). Vocabularies of 8,000 are trained by Hugging Face on the first
0.5 MB of the standard library's sources (the Llama 2, Mistral and Phi-3 ones as SentencePiece
trains them: no token crosses a word's leading ``▁``); the rows encode the following files (2 MB; 0.5 MB with ``quick``), text the
encoders have not met: both caches are emptied and warmed on Tiny Shakespeare before each run
(``clear_piece_caches``; HF's ``model._clear_cache``), as ``peers_byte_bpe`` does. Ids are checked
equal on every timed text first. Both sides encode text by text on one thread, in turns; a row
shows the fastest run, ``ratio = peer_s / engine_s``. Run: ``python bench/peers_hf_pipeline.py [--quick]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from timing import hf_parallelism, median, row as bench_row, runs_interleaved, shakespeare_path

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["llama2-sp", "mistral-sp", "phi3-sp", "qwen2", "llama3", "starcoder", "deepseek", "deepseek-coder", "falcon",
            "mpt", "command-r", "gpt2"]


def rows(quick: bool = False) -> list[dict]:
    with hf_parallelism(False):
        return _rows(quick)


def _rows(quick: bool) -> list[dict]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from engine.tokenizers.hf_pipeline import HfBpeTokenizer
    from hf_families import build_family
    from peers_byte_bpe import stdlib_texts

    texts, train, size = [], [], 0
    for text in stdlib_texts():
        size += len(text.encode())
        if size <= 500_000:
            train.append(text)
        else:
            texts.append(text)
            if size >= (1_000_000 if quick else 2_500_000):
                break
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    warmup = [shakespeare_path().read_text("utf-8")[:300_000]]
    out = []
    for name in FAMILIES:
        hf = build_family(name, 8000, train)
        hf.encode_special_tokens = True
        ours = HfBpeTokenizer(json.loads(hf.to_str()))
        if [ours.encode(t).tolist() for t in texts] != [hf.encode(t, add_special_tokens=False).ids for t in texts]:
            raise RuntimeError(f"{name}: engine's ids differ from Hugging Face's")

        def engine_setup():
            ours.clear_piece_caches()
            [ours.encode(t) for t in warmup]

        def hf_setup():
            hf.model._clear_cache()
            [hf.encode(t, add_special_tokens=False) for t in warmup]

        engine_runs, peer_runs = runs_interleaved(
            lambda: [ours.encode(t) for t in texts], lambda: [hf.encode(t, add_special_tokens=False) for t in texts],
            2 if quick else 3, engine_setup=engine_setup, peer_setup=hf_setup)
        out.append(bench_row(f"{name.removesuffix('-sp')}-style tokenizer.json, encode {megabytes:.1f} MB once, 1 thread",
                             min(engine_runs), "HF tokenizers encode", min(peer_runs),
                             engine_median_s=median(engine_runs), peer_median_s=median(peer_runs), at_least=10))
    return out


if __name__ == "__main__":
    for r in rows(quick="--quick" in sys.argv):
        print(f"{r['benchmark']}: engine {r['engine_s'] * 1e3:.0f} ms, HF {r['peer_s'] * 1e3:.0f} ms, "
              f"{r['ratio']:.1f}x (target {r['target']})")
