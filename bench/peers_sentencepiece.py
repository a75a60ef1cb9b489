"""SentencePiece BPE models (``.model`` files) against the ``sentencepiece`` library, side by side.

Model: BPE, 8,000 pieces, ``nmt_nfkc`` and ``byte_fallback`` (as Llama 2 and Mistral are built),
trained by ``sentencepiece`` on Tiny Shakespeare (cached in bench/.cache). Corpora: the standard
library's .py files (3 MB with ``quick``, else about 32 MB; text the model was not trained on:
code), Tiny Shakespeare, and the bundled en/el/ru corpus. Every row checks that the library gives
the same ids before timing.

As in peers_byte_bpe.py, the rows time what ``engine prepare`` does, each text encoded once on
text the encoder has not met: engine's caches of merged chunks are emptied and warmed on other
text before each run (``clear_piece_caches``); ``sentencepiece`` keeps no cache across calls and
gets the same warm-up. The library encodes one text per call (``encode(text)``: one thread; its
list form would use several). Engine and the library are timed in turns; ``ratio = peer_s /
engine_s``. The 2-thread row's peer is engine on one thread.
Run: ``python bench/peers_sentencepiece.py [--quick]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from peers_byte_bpe import multilingual_texts, stdlib_texts, unseen
from timing import median, row as bench_row, runs_interleaved, shakespeare_path

CACHE = Path(__file__).resolve().parent / ".cache"
VOCAB = 8000


def trained_model() -> Path:
    import sentencepiece as spm

    path = CACHE / f"spm-bpe-shakespeare-{VOCAB}.model"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        spm.SentencePieceTrainer.train(input=str(shakespeare_path()), model_prefix=str(path.with_suffix("")),
                                       model_type="bpe", vocab_size=VOCAB, byte_fallback=True, minloglevel=2)
    return path


def rows(quick: bool = False) -> list[dict]:
    try:
        import sentencepiece as spm
    except ImportError:
        return []
    from engine.tokenizers.loading import load_tokenizer

    path = trained_model()
    tokenizer = load_tokenizer(path)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    texts = stdlib_texts(3_000_000 if quick else None)
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    shakespeare = [shakespeare_path().read_text("utf-8")]
    first_megabyte = stdlib_texts(1_000_000)
    multilingual = multilingual_texts()
    repeat = 3 if quick else 5
    out = []

    def timed_row(name, engine_runs, peer, peer_runs, **target):
        out.append(bench_row(name, min(engine_runs), peer, min(peer_runs), engine_median_s=median(engine_runs),
                             peer_median_s=median(peer_runs), runs=len(engine_runs), **target))

    tokenizer.encode_batch(texts[:3])  # compile outside the timed regions
    corpora = [
        (f"stdlib {megabytes:.0f} MB", texts, shakespeare, repeat),
        ("tinyshakespeare 1 MB", shakespeare, first_megabyte, 2 * repeat + 1),
        (f"en/el/ru corpus {sum(len(t.encode()) for t in multilingual) / 1e3:.0f} kB", multilingual, first_megabyte,
         10 * repeat + 1),
    ]
    for name, corpus, warmup, rounds in corpora:
        if [a.tolist() for a in tokenizer.encode_batch(corpus)] != [sp.encode(t) for t in corpus]:
            raise RuntimeError(f"sentencepiece ids differ from engine ids on {name}")
        ours, theirs = runs_interleaved(
            lambda: tokenizer.encode_batch(corpus, threads=1), lambda: [sp.encode(t) for t in corpus], rounds,
            engine_setup=unseen(tokenizer, warmup), peer_setup=lambda: [sp.encode(t) for t in warmup])
        timed_row(f"spm-bpe encode {name} once, 1 thread", ours, "sentencepiece encode", theirs, at_least=10)
    if [a.tolist() for a in tokenizer.encode_batch(texts, threads=2)] != [a.tolist() for a in tokenizer.encode_batch(texts)]:
        raise RuntimeError("engine ids on 2 threads differ from 1 thread")
    two, one = runs_interleaved(lambda: tokenizer.encode_batch(texts, threads=2),
                                lambda: tokenizer.encode_batch(texts, threads=1), repeat,
                                engine_setup=unseen(tokenizer, shakespeare, 2), peer_setup=unseen(tokenizer, shakespeare))
    timed_row(f"spm-bpe encode stdlib {megabytes:.0f} MB once, 2 threads", two, "engine on 1 thread", one,
              at_least=1.8)
    return out


if __name__ == "__main__":  # pragma: no cover
    for r in rows(quick="--quick" in sys.argv):
        print(f"{r['benchmark']:<50} engine {r['engine_s'] * 1e3:9.2f} ms  {r['peer']:<22} "
              f"{r['peer_s'] * 1e3:10.2f} ms  {r['ratio']:8.1f}x  target {r['target']}")
