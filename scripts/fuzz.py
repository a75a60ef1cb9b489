"""Bounded-time fuzzing of the corpus readers (JSONL, Parquet) and the tokenizer file loader.

Each target takes bytes, writes them to a file, and reads it back the way engine does. The only
exception a target may raise is its EngineError subclass (CorpusError for readers, TokenizerError
for the loader); a tokenizer file that loads must be one of the seed tokenizers (the content hash
makes any other outcome a bug). Anything else is a crash: the input is written to
``--crash-dir`` and its path printed, and the script exits 1.

Engines: ``atheris`` (coverage-guided libFuzzer, if ``pip install atheris`` worked) or ``random``
(seeded mutations of valid seed files: bit flips, byte edits, truncation, splices, insertion of
JSON/UTF-8 trouble makers). ``auto`` picks atheris when it imports. Cost: one file write and one
read per input; a few thousand inputs per second with the random engine.

    $ python scripts/fuzz.py --seconds 60 --target all
    fuzz: random engine, targets jsonl, parquet, tokenizer, 60 s, seed 0
    fuzz: 153,402 inputs, no crash (jsonl 51,120, parquet 50,871, tokenizer 51,411)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable

TARGETS = ("jsonl", "parquet", "tokenizer")
TROUBLE = [b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b'"', b"\\", b"\\u0000", b"\\ud800", b"{", b"}", b"[" * 64,
           b"1e999", b"-0", b"null", b'"id"', b'"text"', b"\n", b"\r\n", b" ", b"PAR1", b"\x7f" * 8]


class Crash(Exception):
    """An input made a target raise something other than its EngineError subclass."""


def _seed_texts() -> list[str]:
    return ["the cat sat on the mat.", "", "NUL\x00 inside", "ünïcödé ✓ 𝄞", "a\tb\nc", "x" * 300]


def jsonl_seeds() -> list[bytes]:
    import json

    lines = [json.dumps({"id": f"d{i}", "text": t}, ensure_ascii=i % 2 == 0) for i, t in enumerate(_seed_texts())]
    return ["\n".join(lines).encode() + b"\n", b'{"id": "a", "text": "x"}\n\n{"id": "b", "text": "y"}']


def parquet_seeds() -> list[bytes]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    seeds = []
    for compression in ("none", "snappy"):
        texts = _seed_texts()
        table = pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts})
        sink = io.BytesIO()
        pq.write_table(table, sink, compression=compression, row_group_size=3)
        seeds.append(sink.getvalue())
    return seeds


def tokenizer_seeds() -> tuple[list[bytes], set[str]]:
    from engine.tokenizers.bpe import BpeTrainer
    from engine.tokenizers.char import CharTokenizer
    from engine.tokenizers.word import WordTokenizer

    text = " ".join(_seed_texts())
    toks = [CharTokenizer.fit(text), WordTokenizer.fit(text, unknown="<unk>"), BpeTrainer(30).train(text)]
    seeds = []
    with tempfile.TemporaryDirectory() as tmp:
        for tok in toks:
            seeds.append(tok.save(Path(tmp) / f"{tok.kind}.json").read_bytes())
    return seeds, {tok.hash for tok in toks}


class Targets:
    """The three targets; each writes its input to a scratch file and reads it with engine."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        _, self.known_hashes = tokenizer_seeds()

    def jsonl(self, data: bytes) -> None:
        from engine.corpus import iter_jsonl
        from engine.errors import CorpusError

        path = self.scratch / "input.jsonl"
        path.write_bytes(data)
        policy = ("error", "replace", "skip")[len(data) % 3]
        try:
            for doc in iter_jsonl(path, on_invalid_utf8=policy, skip_bad_lines=len(data) % 2 == 0):
                if not (isinstance(doc.id, str) and doc.id and isinstance(doc.text, str)):
                    raise Crash(f"iter_jsonl yielded a malformed document {doc!r:.80}")
                doc.text.encode("utf-8")  # a document must be valid UTF-8 text
        except CorpusError:
            pass

    def parquet(self, data: bytes) -> None:
        from engine.corpus import iter_parquet
        from engine.errors import CorpusError

        path = self.scratch / "input.parquet"
        path.write_bytes(data)
        try:
            for doc in iter_parquet(path, batch_size=2):
                if not (isinstance(doc.id, str) and doc.id and isinstance(doc.text, str)):
                    raise Crash(f"iter_parquet yielded a malformed document {doc!r:.80}")
        except CorpusError:
            pass

    def tokenizer(self, data: bytes) -> None:
        from engine.errors import TokenizerError
        from engine.tokenizers.base import load_tokenizer

        path = self.scratch / "input.json"
        path.write_bytes(data)
        try:
            tok = load_tokenizer(path)
        except TokenizerError:
            return
        if tok.hash not in self.known_hashes:
            raise Crash(f"a mutated file loaded as a tokenizer no seed was: {tok!r}")


def mutate(rng: random.Random, data: bytes, seeds: list[bytes]) -> bytes:
    """One to four random edits of ``data``."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(8)
        at = rng.randrange(len(out) + 1)
        if op == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and out:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        elif op == 2:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 3:
            del out[at : at + rng.randint(1, 16)]
        elif op == 4:
            out = out[:at]
        elif op == 5:
            out[at:at] = rng.choice(TROUBLE)
        elif op == 6 and out:
            start = rng.randrange(len(out))
            out[at:at] = out[start : start + rng.randint(1, 64)]
        else:
            other = rng.choice(seeds)
            cut = rng.randrange(len(other) + 1)
            out = out[:at] + other[cut:]
    return bytes(out)


def save_crash(crash_dir: Path, target: str, data: bytes) -> Path:
    crash_dir.mkdir(parents=True, exist_ok=True)
    path = crash_dir / f"crash-{target}-{hashlib.sha1(data).hexdigest()[:16]}.bin"
    path.write_bytes(data)
    return path


def run_random(targets: dict[str, Callable[[bytes], None]], seeds: dict[str, list[bytes]], seconds: float,
               seed: int, crash_dir: Path) -> int:
    """Mutation loop until ``seconds`` pass; returns the exit status (0: no crash, 1: crash)."""
    rng = random.Random(seed)
    counts = dict.fromkeys(targets, 0)
    deadline = time.monotonic() + seconds
    names = list(targets)
    while time.monotonic() < deadline:
        name = names[sum(counts.values()) % len(names)]
        pool = seeds[name]
        data = rng.choice(pool) if counts[name] < len(pool) else mutate(rng, rng.choice(pool), pool)
        counts[name] += 1
        try:
            targets[name](data)
        except Exception:  # noqa: BLE001 - every unexpected exception is the finding
            traceback.print_exc()
            path = save_crash(crash_dir, name, data)
            print(f"fuzz: {name} crashed on input #{counts[name]}; crashing input written to {path}", file=sys.stderr)
            return 1
    total = sum(counts.values())
    detail = ", ".join(f"{name} {n:,}" for name, n in counts.items())
    print(f"fuzz: {total:,} inputs, no crash ({detail})")
    return 0


def run_atheris(targets: dict[str, Callable[[bytes], None]], seeds: dict[str, list[bytes]], seconds: float,
                seed: int, crash_dir: Path) -> int:
    """Coverage-guided: libFuzzer picks inputs; the first byte chooses the target when there are several."""
    import atheris

    names = list(targets)
    corpus_dir = Path(tempfile.mkdtemp(prefix="engine-fuzz-seeds-"))
    for name in names:
        for i, data in enumerate(seeds[name]):
            prefix = bytes([names.index(name)]) if len(names) > 1 else b""
            (corpus_dir / f"{name}-{i}").write_bytes(prefix + data)

    def one_input(data: bytes) -> None:
        name = names[0]
        if len(names) > 1:
            if not data:
                return
            name, data = names[data[0] % len(names)], data[1:]
        try:
            targets[name](data)
        except Exception:
            path = save_crash(crash_dir, name, data)
            print(f"fuzz: {name} crashed; crashing input written to {path}", file=sys.stderr)
            raise

    crash_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.argv[0], f"-max_total_time={max(1, int(seconds))}", f"-seed={seed + 1}",
            f"-artifact_prefix={crash_dir}{os.sep}", "-print_final_stats=1", str(corpus_dir)]
    atheris.Setup(argv, one_input)
    atheris.Fuzz()  # exits the process: 0 when the time is up, non-zero on a crash
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to fuzz (default 10)")
    parser.add_argument("--target", choices=TARGETS + ("all",), default="all")
    parser.add_argument("--engine", choices=("auto", "atheris", "random"), default="auto")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random engine (default 0)")
    parser.add_argument("--crash-dir", type=Path, default=Path("fuzz-crashes"), help="where crashing inputs go")
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be > 0")

    engine_name = args.engine
    if engine_name != "random":
        try:
            import atheris  # noqa: F401
        except ImportError:
            if engine_name == "atheris":
                parser.error("atheris is not installed (pip install atheris); use --engine random")
            engine_name = "random"
        else:
            engine_name = "atheris"

    if engine_name == "atheris":
        import atheris

        # Coverage for engine's own Python code; kernels stay uninstrumented (Numba compiles their bytecode).
        package = Path(__file__).resolve().parent.parent / "engine"
        kernels = [f"engine.{sub}.{f.stem}" for sub in ("kernels", "cuda") for f in (package / sub).glob("*.py")]
        with atheris.instrument_imports(include=["engine"], exclude=kernels):
            import engine.corpus  # noqa: F401
            import engine.tokenizers  # noqa: F401
            import engine.tokenizers.base  # noqa: F401

    names = TARGETS if args.target == "all" else (args.target,)
    scratch = Path(tempfile.mkdtemp(prefix="engine-fuzz-"))
    all_targets = Targets(scratch)
    targets = {name: getattr(all_targets, name) for name in names}
    seeds = {"jsonl": jsonl_seeds(), "parquet": parquet_seeds(), "tokenizer": tokenizer_seeds()[0]}
    print(f"fuzz: {engine_name} engine, targets {', '.join(names)}, {args.seconds:g} s, seed {args.seed}", flush=True)
    if engine_name == "atheris":  # libFuzzer ends the process itself; its scratch stays in the temp directory
        return run_atheris(targets, seeds, args.seconds, args.seed, args.crash_dir.absolute())
    try:
        return run_random(targets, seeds, args.seconds, args.seed, args.crash_dir.absolute())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
