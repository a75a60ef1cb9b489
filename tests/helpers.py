"""Small helpers shared by several test files (one definition each)."""

import functools
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

from engine.cli import main
from engine.corpus import Partition
from engine.store import EncodedDocument, TokenStore
from engine.tokenizers.char import CharTokenizer

# Property tests that also take a tmp_path fixture.
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def small_store(path: Path) -> TokenStore:
    tok = CharTokenizer.fit("abcdefgh ")
    docs = {
        "train": [EncodedDocument(f"t{i}", "train", tok.encode_document("abc defg " * (i + 1))) for i in range(20)],
        "validation": [EncodedDocument("v", "validation", tok.encode_document("hgf"))],
    }
    return TokenStore.write(path, docs, tok)


def _small_corpus(tmp_path):
    (tmp_path / "c.jsonl").write_text(
        '{"id": "a", "text": "hello world"}\n{"id": "b", "text": ""}\n{"id": "c", "text": "low"}\n', encoding="utf-8")
    return tmp_path / "c.jsonl"


def framed(rng, length: int, high: int = 50_000) -> np.ndarray:
    """BOS (0), ``length - 2`` random ids below ``high``, EOS (1): a store document."""
    return np.concatenate([[0], rng.integers(2, high, length - 2), [1]]).astype(np.uint32)


def random_documents(count: int, seed: int, low: int = 5, high: int = 80, prefix: str = "d", id_high: int = 50_000):
    """``count`` framed train documents of ``low..high - 1`` tokens, named ``prefix + i``."""
    rng = np.random.default_rng(seed)
    return [EncodedDocument(f"{prefix}{i}", Partition.TRAIN, framed(rng, int(rng.integers(low, high)), id_high))
            for i in range(count)]


def rank_slices(source, world_size, collect, state=None, num_workers=0, stop_after=None, epochs=2):
    """Run a TokenDataset over ``source`` rank by rank, each from ``state`` and for at most ``stop_after`` batches,
    keeping every batch and reading them after the loop.

    ``collect`` turns loader items into records ``(epoch, batch_index, part, ...)``, a part being a list of rows
    or a dict of them. Returns the records with every part joined over the ranks (in rank order), per global
    batch, and each rank's state_dict at the stop.
    """
    from engine.torch import TokenDataset  # needs torch, which tests without it import this file without

    per_rank, states = [], []
    for rank in range(world_size):
        ds = TokenDataset(source, rank=rank, world_size=world_size, epochs=epochs)
        if state is not None:
            ds.load_state_dict(state)
        kept = []  # the batches themselves, read only after the loop: each batch is its own tensors
        for item in ds.loader(num_workers=num_workers, multiprocessing_context="fork" if num_workers else None):
            kept.append(item)
            if stop_after is not None and len(kept) == stop_after:
                break
        per_rank.append(collect(kept))
        states.append(ds.state_dict())
    joined = []
    for shares in zip(*per_rank):
        assert len({share[:2] for share in shares}) == 1
        record = list(shares[0][:2])
        for part in zip(*(share[2:] for share in shares)):  # one part of the record, from every rank
            if isinstance(part[0], dict):
                record.append({name: sum((p[name] for p in part), []) for name in part[0]})
            else:
                record.append(sum(part, []))
        joined.append(tuple(record))
    return joined, states


@functools.lru_cache(maxsize=1)
def newer_than_tables() -> frozenset[int]:
    """Code points the ``regex`` module (Unicode 18.0) classifies otherwise than engine's tables
    (Unicode 16.0, as tiktoken and Oniguruma have it): those assigned after 16.0, and U+0295 (Ll in
    16.0, Lo in 18.0). Tests that take ``regex`` as their oracle leave these out;
    ``tests/test_unicode_version.py`` checks them against the references themselves."""
    import regex

    from engine.tokenizers.regex import compile_regex

    text = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    data = text.encode()
    ours = {ord(data[s:e].decode()) for s, e in compile_regex(r"\p{Cn}").find_spans(data).tolist()}
    theirs = {ord(m.group()) for m in regex.finditer(r"\p{Cn}", text)}
    return frozenset(ours - theirs) | {0x0295}
