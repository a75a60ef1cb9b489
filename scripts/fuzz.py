"""Bounded-time fuzzing of engine's readers: corpus files (JSONL, Parquet), tokenizer files (engine,
tiktoken, tokenizer.json) and the saved epoch index (``engine batches show``).

Each target takes bytes, writes them to a file, and reads it back the way engine does. The only
exception a target may raise is its EngineError subclass (CorpusError for readers, TokenizerError
for tokenizer files; the epoch target runs ``engine batches show`` and accepts exit 0 or exit 2 with
one ``error:`` line); an engine tokenizer file that loads unedited must be one of the seed tokenizers
(the content hash makes any other outcome a bug), an edited one must save and load as itself, and
an imported tokenizer must round-trip a text. Anything else is a crash: the input is written to
``--crash-dir`` and its path printed, and the script exits 1.

The jsonl target reads its input twice, as whole lines and with ``long_lines`` (thresholds of a few
bytes, so most lines are scanned in blocks and their texts decoded part by part), and the two must
give the same documents or the same error.

Reaching the parsers behind the checks: the tokenizer targets also parse their input as JSON and
apply one structured edit chosen from the input's own hash (a value replaced by -1, 2^32, a
string, null, ...); the engine-tokenizer target then recomputes the file's content hash, so the
edit reaches the payload parser instead of failing the hash check. Targets stay pure functions
of their bytes, so a saved crash replays.

Engines: ``atheris`` (coverage-guided libFuzzer, if ``pip install atheris`` worked) or ``random``
(seeded mutations of valid seed files: bit flips, byte edits, truncation, splices, insertion of
JSON/UTF-8 trouble makers). ``auto`` picks atheris when it imports. The random engine gives every
target the same share of ``--seconds`` (it always runs the target with the least time so far).

    $ python scripts/fuzz.py --seconds 60 --target all
    fuzz: random engine, targets jsonl, parquet, tokenizer, tiktoken, tokenizer.json, epoch, 60 s, seed 0
    fuzz: 98,402 inputs, no crash (jsonl 31,120 in 10.0 s, parquet 20,871 in 10.0 s, ...)
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable

TARGETS = ("jsonl", "parquet", "tokenizer", "tiktoken", "tokenizer.json", "epoch")
# Values a structured edit puts in place of a JSON value (ids out of range, wrong types, ...).
EDIT_VALUES = [-1, 0, 1, 255, 256, 257, 2**31, 2**32, 1_500_000_000, 10**11, "7", "", "Ġ", None, True, 2.5, [], {},
               [0, 1], {"type": "NFC"}]
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
    from engine.tokenizers.byte_bpe import ByteBpeTrainer
    from engine.tokenizers.char import CharTokenizer
    from engine.tokenizers.word import WordTokenizer

    text = " ".join(_seed_texts())
    toks = [CharTokenizer.fit(text), WordTokenizer.fit(text, unknown="<unk>"), BpeTrainer(30).train(text),
            ByteBpeTrainer(20).train(text)]
    seeds = []
    with tempfile.TemporaryDirectory() as tmp:
        for tok in toks:
            seeds.append(tok.save(Path(tmp) / f"{tok.kind}.json").read_bytes())
    return seeds, {tok.hash for tok in toks}


def _byte_level_vocab() -> dict[str, int]:
    from engine.tokenizers.byte_bpe import bytes_to_unicode

    table = bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    vocab.update({table[ord("t")] + table[ord("h")]: 256, table[ord("t")] + table[ord("h")] + table[ord("e")]: 257})
    return vocab


def tiktoken_seeds() -> list[bytes]:
    """Rank files: the 256 bytes then two merged tokens, one with a blank line and CRLF."""
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines += [f"{base64.b64encode(b'th').decode()} 256", f"{base64.b64encode(b'the').decode()} 257"]
    return ["\n".join(lines).encode() + b"\n", ("\r\n".join(lines[:200]) + "\r\n\r\n" + "\r\n".join(lines[200:])).encode()]


def hf_json_seeds() -> list[bytes]:
    """tokenizer.json files: ByteLevel with string merges, and Split(cl100k)+ByteLevel with pair merges."""
    from engine.tokenizers.byte_bpe import bytes_to_unicode
    from engine.tokenizers.pretokenize import PATTERNS

    table = bytes_to_unicode()
    t, h, e = table[ord("t")], table[ord("h")], table[ord("e")]
    first = {
        "version": "1.0", "normalizer": None,
        "added_tokens": [{"id": 258, "content": "<|endoftext|>", "special": True}],
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "model": {"type": "BPE", "vocab": _byte_level_vocab(), "merges": [f"{t} {h}", f"{t}{h} {e}"]},
    }
    second = json.loads(json.dumps(first))
    second["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": PATTERNS["cl100k"]}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
    second["model"]["merges"] = [[t, h], [t + h, e]]
    second["added_tokens"].append({"id": 259, "content": "<pad>", "special": True})
    return [json.dumps(first).encode(), json.dumps(second, ensure_ascii=False, indent=1).encode()]


def edit_json(data: bytes, obj):
    """One structured edit of parsed JSON, chosen by the hash of ``data`` (so a crash replays):
    a value (or a key's value) replaced by one of EDIT_VALUES, or an entry deleted or duplicated."""
    rng = random.Random(hashlib.sha256(data).digest())
    paths = []

    def walk(node, path, depth):
        if depth > 6:
            return
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            paths.append(path + (key,))
            if isinstance(value, (dict, list)) and rng.random() < 0.5:
                walk(value, path + (key,), depth + 1)

    walk(obj, (), 0)
    if not paths:
        return obj
    path = rng.choice(paths)
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    action = rng.randrange(4)
    if action == 0:
        del parent[path[-1]]
    elif action == 1 and isinstance(parent, list):
        parent.append(parent[path[-1]])
    else:
        parent[path[-1]] = json.loads(json.dumps(rng.choice(EDIT_VALUES)))
    return obj


def with_content_hash(obj):
    """An engine tokenizer file object with its "hash" recomputed from its kind and payload."""
    from engine.tokenizers.base import canonical_json

    try:
        obj["hash"] = hashlib.sha256(canonical_json({"kind": obj.get("kind"), "payload": obj.get("payload")})).hexdigest()
    except (UnicodeEncodeError, TypeError, ValueError):
        pass
    return obj


def _parse_json(data: bytes):
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def make_epoch(scratch: Path) -> tuple[Path, bytes]:
    """A small store and a saved epoch index over it; returns the epoch directory and its manifest bytes."""
    from click.testing import CliRunner

    from engine.cli import main
    from engine.store import EncodedDocument, TokenStore
    from engine.tokenizers.char import CharTokenizer

    texts = [t for t in _seed_texts() if t]
    tok = CharTokenizer.fit(" ".join(texts))
    docs = [EncodedDocument(f"d{i}\n{t[:3]}", "train", tok.encode_document(t)) for i, t in enumerate(texts)]
    store = scratch / "epoch-store"
    TokenStore.write(store, {"train": docs, "validation": [], "test": []}, tok)
    epoch = scratch / "epoch"
    result = CliRunner().invoke(main, ["batches", str(store), "--context", "4", "--batch-size", "5", "--seed", "3",
                                       "--out", str(epoch)])
    if result.exit_code != 0:
        raise RuntimeError(f"cannot build the epoch seed: {result.output}")
    return epoch, (epoch / "manifest.json").read_bytes()


def tiny_long_lines():
    """``ReadLimits`` of a few bytes, so that the jsonl target's lines reach the long-line scanner."""
    from engine.corpus import ReadLimits

    return ReadLimits(long_line_bytes=48, long_string_bytes=12, part_bytes=16, scan_block_bytes=24)


class Targets:
    """The targets; each writes its input to a scratch file and reads it with engine."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        _, self.known_hashes = tokenizer_seeds()
        self.epoch_dir, self.epoch_manifest = make_epoch(scratch)

    def jsonl(self, data: bytes) -> None:
        from engine.corpus import iter_jsonl
        from engine.errors import CorpusError

        path = self.scratch / "input.jsonl"
        path.write_bytes(data)
        policy = ("error", "replace", "skip")[len(data) % 3]
        read = []
        for long_lines in (False, True):
            try:
                docs = []
                for doc in iter_jsonl(path, on_invalid_utf8=policy, skip_bad_lines=len(data) % 2 == 0,
                                      long_lines=long_lines, limits=tiny_long_lines()):
                    text = str(doc.text)  # a long line's text is read from the file
                    if not (isinstance(doc.id, str) and doc.id and (long_lines or isinstance(doc.text, str))):
                        raise Crash(f"iter_jsonl yielded a malformed document {doc!r:.80}")
                    text.encode("utf-8")  # a document must be valid UTF-8 text
                    docs.append((doc.id, text, len(doc.text)))
                read.append(docs)
            except CorpusError as exc:
                read.append(str(exc))
        if read[0] != read[1]:  # lines past the (tiny) long-line threshold read as whole lines do
            raise Crash(f"long_lines=True read {read[1]!r:.200}, whole lines {read[0]!r:.200}")

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
        from engine.tokenizers.base import tokenizer_from_json
        from engine.tokenizers.loading import load_tokenizer

        path = self.scratch / "input.json"
        path.write_bytes(data)
        try:
            tok = load_tokenizer(path)
        except TokenizerError:
            pass
        else:
            if tok.hash not in self.known_hashes:
                raise Crash(f"a mutated file loaded as a tokenizer no seed was: {tok!r}")
        obj = _parse_json(data)
        if not isinstance(obj, dict):
            return
        # The same file, edited and with its content hash recomputed: the payload parser runs.
        for edited in (with_content_hash(obj), with_content_hash(edit_json(data, obj))):
            path.write_text(json.dumps(edited), encoding="utf-8", errors="surrogatepass")
            try:
                tok = load_tokenizer(path)
            except TokenizerError:
                continue
            # An optional key may default (another hash); what loads must then save and load as itself.
            again = tokenizer_from_json(json.loads(json.dumps(tok.to_json())))
            if again.hash != tok.hash:
                raise Crash(f"a loaded tokenizer {tok!r} does not survive save and load (got {again!r})")

    def tiktoken(self, data: bytes) -> None:
        from engine.errors import TokenizerError
        from engine.tokenizers.interop import load_tiktoken

        path = self.scratch / "input.tiktoken"
        path.write_bytes(data)
        specials = (None, {"<|endoftext|>": 300}, {"<a>": 300, "<b>": 301})[len(data) % 3]
        try:
            tok = load_tiktoken(path, special_tokens=specials, bos="<a>" if specials and "<a>" in specials else None)
        except TokenizerError:
            return
        if tok.decode_bytes(tok.encode_batch(["the theme"])[0]) != b"the theme":
            raise Crash(f"an imported tiktoken file does not round-trip: {tok!r}")

    def tokenizer_json(self, data: bytes) -> None:
        from engine.errors import TokenizerError
        from engine.tokenizers.interop import load_hf_tokenizer_json

        path = self.scratch / "tokenizer.json"
        inputs = [data]
        obj = _parse_json(data)
        if obj is not None:
            inputs.append(json.dumps(edit_json(data, obj)).encode("utf-8", "surrogatepass"))
        for content in inputs:
            path.write_bytes(content)
            try:
                tok = load_hf_tokenizer_json(path)
            except TokenizerError:
                continue
            if tok.decode_bytes(tok.encode_batch(["the theme"])[0]) != b"the theme":
                raise Crash(f"an imported tokenizer.json does not round-trip: {tok!r}")

    def epoch(self, data: bytes) -> None:
        from click.testing import CliRunner

        from engine.cli import main

        inputs = [data]
        obj = _parse_json(data)
        if obj is not None:
            inputs.append(json.dumps(edit_json(data, obj)).encode("utf-8", "surrogatepass"))
        try:
            for content in inputs:
                (self.epoch_dir / "manifest.json").write_bytes(content)
                result = CliRunner().invoke(main, ["batches", "show", str(self.epoch_dir), "--batch", str(len(data) % 3)])
                if result.exit_code == 0:
                    continue
                lines = result.output.strip().splitlines()
                if result.exit_code != 2 or len(lines) != 1 or not lines[0].startswith("error: "):
                    raise Crash(f"batches show exited {result.exit_code}: {result.output[-500:]!r}")
        finally:
            (self.epoch_dir / "manifest.json").write_bytes(self.epoch_manifest)


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
    spent = dict.fromkeys(targets, 0.0)
    for name, target in targets.items():  # every seed once before the clock starts: kernels compile here
        for data in seeds[name]:
            try:
                target(data)
            except Exception:  # noqa: BLE001 - a seed that crashes is a finding too
                traceback.print_exc()
                print(f"fuzz: {name} crashed on a seed; written to {save_crash(crash_dir, name, data)}", file=sys.stderr)
                return 1
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        name = min(spent, key=spent.get)  # every target gets the same share of the time
        pool = seeds[name]
        data = rng.choice(pool) if counts[name] < len(pool) else mutate(rng, rng.choice(pool), pool)
        counts[name] += 1
        started = time.monotonic()
        try:
            targets[name](data)
        except Exception:  # noqa: BLE001 - every unexpected exception is the finding
            traceback.print_exc()
            path = save_crash(crash_dir, name, data)
            print(f"fuzz: {name} crashed on input #{counts[name]}; crashing input written to {path}", file=sys.stderr)
            return 1
        spent[name] += time.monotonic() - started
    total = sum(counts.values())
    detail = ", ".join(f"{name} {n:,} in {spent[name]:.1f} s" for name, n in counts.items())
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
            import engine.commands.batches  # noqa: F401
            import engine.corpus  # noqa: F401
            import engine.tokenizers  # noqa: F401
            import engine.tokenizers.base  # noqa: F401
            import engine.tokenizers.interop  # noqa: F401

    names = TARGETS if args.target == "all" else (args.target,)
    scratch = Path(tempfile.mkdtemp(prefix="engine-fuzz-"))
    all_targets = Targets(scratch)
    targets = {name: getattr(all_targets, name.replace(".", "_")) for name in names}
    all_seeds = {"jsonl": jsonl_seeds, "parquet": parquet_seeds, "tokenizer": lambda: tokenizer_seeds()[0],
                 "tiktoken": tiktoken_seeds, "tokenizer.json": hf_json_seeds, "epoch": lambda: [all_targets.epoch_manifest]}
    seeds = {name: all_seeds[name]() for name in names}
    print(f"fuzz: {engine_name} engine, targets {', '.join(names)}, {args.seconds:g} s, seed {args.seed}", flush=True)
    if engine_name == "atheris":  # libFuzzer ends the process itself; its scratch stays in the temp directory
        return run_atheris(targets, seeds, args.seconds, args.seed, args.crash_dir.absolute())
    try:
        return run_random(targets, seeds, args.seconds, args.seed, args.crash_dir.absolute())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
