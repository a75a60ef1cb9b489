"""The peer of bench/peers_export.py: the work Megatron-LM's ``tools/preprocess_data.py`` does, in a
module of its own so that its worker processes can import it (a peers_* module is loaded by path).

``multiprocessing.Pool(2)`` whose workers load the ``tokenizer.json`` with Hugging Face ``tokenizers``
(preprocess_data's ``Encoder.initializer``) and map ``json.loads`` + ``encode(text,
add_special_tokens=False).ids`` + the end-of-document id over the corpus lines (``imap``, chunks of
32, as preprocess_data's ``--append-eod``: an empty text gets no sequence); the main process adds each
document with ``IndexedDatasetBuilder.add_document(ids, lengths)`` (dtype ``DType.optimal_dtype`` of
the vocabulary size) and ``finalize``s.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

THREADS = 2


class _Encoder:
    """``preprocess_data.py``'s Encoder: one tokenizer per worker process, one JSON line per call."""

    tokenizer = None
    eod = None

    def __init__(self, tokenizer_path: str, eod: int):
        self.tokenizer_path, self.eod_id = tokenizer_path, eod

    def initializer(self):
        from tokenizers import Tokenizer

        _Encoder.tokenizer = Tokenizer.from_file(self.tokenizer_path)
        _Encoder.eod = self.eod_id

    def encode(self, line: str):
        data = json.loads(line)
        ids = _Encoder.tokenizer.encode(data["text"], add_special_tokens=False).ids
        lens = []
        if ids:
            lens.append(len(ids))
            ids.append(_Encoder.eod)
            lens[-1] += 1
        return ids, lens, len(line)


def run_preprocess_data(corpus: Path, tokenizer: Path, eod: int, work: Path) -> tuple[float, Path]:
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder
    from tokenizers import Tokenizer

    prefix = work / "megatron-train"
    start = time.perf_counter()
    vocab_size = Tokenizer.from_file(str(tokenizer)).get_vocab_size(with_added_tokens=True)
    encoder = _Encoder(str(tokenizer), eod)
    with open(corpus, encoding="utf-8") as fin, multiprocessing.get_context("fork").Pool(
            THREADS, initializer=encoder.initializer) as pool:
        builder = IndexedDatasetBuilder(str(prefix) + ".bin", dtype=DType.optimal_dtype(vocab_size))
        for ids, lens, _ in pool.imap(encoder.encode, fin, 32):
            builder.add_document(ids, lens)
        builder.finalize(str(prefix) + ".idx")
    return time.perf_counter() - start, prefix
