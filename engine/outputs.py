"""What ``prepare`` writes into ``--out`` besides the store, and how it keeps a user's files safe.

``check_out_dir`` runs before anything is read: ``tokenizer.json``, ``report.json`` and ``store``
must be absent or provably engine's (else the error names the file), and the staged outputs of dead
runs are removed (a live run's stay). ``StagedOutputs`` writes ``tokenizer.json`` and
``report.json`` to hidden temporaries while the store is still being written and renames them
after the store is in place; on any error they are removed, so a failed run of either executor
changes nothing in ``--out``. ``report.json`` (``_report``) holds the corpus, the tokenizer, the
per-partition tallies (``PartitionTally``, one report row each), what the reader counted and the
window warnings.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.checks import parse_json
from engine.corpus import PARTITIONS, Partition, ReadReport
from engine.errors import ConfigurationError, TokenizerError
from engine.prepare_options import PrepareOptions
from engine.store.lock import pid_alive
from engine.store.ownership import check_replaceable
from engine.store_files import file_head
from engine.testhook import stop_point
from engine.tokenizers.base import Tokenizer, tokenizer_from_json


__all__ = [
    "PrepareResult", "check_out_dir", "remove_dead_staged", "stage_outputs", "commit_outputs", "drop_staged",
    "StagedOutputs", "finish_report", "window_warning", "PartitionTally",
    "window_warnings", "REPORT_FORMAT", "REPORT_KEYS", "STAGED_PREFIXES",
]

# report.json's first key; reports written before it existed are recognised by REPORT_KEYS.
REPORT_FORMAT = "engine.report"
REPORT_KEYS = ("corpus", "splits", "store", "tokenizer", "context_length", "stride", "threads", "partitions")


class PartitionTally:
    """What the report says about one partition (``KEYS``, each an int), summed chunk by chunk."""

    KEYS = ("documents", "characters", "tokens", "windows", "incomplete_tails", "tail_tokens", "short_documents")

    def __init__(self) -> None:
        self.__dict__.update(dict.fromkeys(self.KEYS, 0))

    def __repr__(self) -> str:
        return f"PartitionTally({', '.join(f'{k}={v}' for k, v in vars(self).items())})"

    def add(self, other: dict[str, int]) -> None:
        for key, value in other.items():
            setattr(self, key, getattr(self, key) + value)


@dataclass(frozen=True)
class PrepareResult:
    out_dir: Path
    store_path: Path
    tokenizer_path: Path
    report_path: Path
    report: dict



def window_warning(split: str, documents: int, windows: int, context_length: int) -> str | None:
    """The warning line of a partition whose documents give no complete window at all, else None
    (``prepare`` and ``engine batches`` print it). Some documents shorter than T + 1 are no problem:
    they are counted (``short_documents``, the table's ``short`` column), not warned about."""
    if documents and not windows:
        return (f"{split}: no complete window: all {documents:,} document(s) are shorter than "
                f"T + 1 = {context_length + 1:,} tokens (use a smaller --context)")
    return None


def window_warnings(tallies: dict[Partition, PartitionTally], context_length: int) -> list[str]:
    """One line per partition whose documents give no complete window."""
    lines = (window_warning(part.value, tallies[part].documents, tallies[part].windows, context_length)
             for part in PARTITIONS)
    return [line for line in lines if line is not None]


def _is_engine_report(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    if "format" in obj:
        return obj["format"] == REPORT_FORMAT
    partitions, tokenizer = obj.get("partitions"), obj.get("tokenizer")
    return (all(key in obj for key in REPORT_KEYS) and isinstance(partitions, dict)
            and set(partitions) == {p.value for p in PARTITIONS} and isinstance(tokenizer, dict)
            and isinstance(tokenizer.get("hash"), str))


def check_out_dir(options: PrepareOptions) -> None:
    """Before anything is read: ``--out`` holds nothing engine did not write where outputs go.

    ``tokenizer.json`` must be an engine tokenizer file (format and content hash), ``report.json``
    an engine report, ``store`` an engine token store (``check_replaceable``); else the error names
    the file. Leftover staged outputs of dead runs are removed. ``--out`` cannot be the corpus folder
    itself: its outputs (the lock during the run, then ``tokenizer.json`` and ``report.json``) would be
    read as documents by the next run."""
    out = options.out_dir
    corpus = Path(options.corpus) if options.corpus is not None else None
    if corpus is not None and corpus.is_dir() and out.exists() and os.path.samefile(corpus, out):
        raise ConfigurationError(f"--out {out}: is the corpus folder itself; its outputs would become documents of "
                                 "the next run over it: choose a folder beside it (or inside it, e.g. "
                                 f"{out / 'prepared'})")
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"{out}: --out exists and is not a folder")
    tokenizer_path, report_path = out / "tokenizer.json", out / "report.json"
    if tokenizer_path.exists() or tokenizer_path.is_symlink():
        try:
            if tokenizer_path.is_symlink():
                raise OSError("a symbolic link")
            tokenizer_from_json(parse_json(tokenizer_path.read_text(encoding="utf-8")), str(tokenizer_path))
        except (OSError, ValueError, TokenizerError) as exc:
            raise ConfigurationError(f"{tokenizer_path}: exists and is not an engine tokenizer file "
                                     f"({type(exc).__name__}); refusing to overwrite it (move it or choose another --out)"
                                     ) from None
    if report_path.exists() or report_path.is_symlink():
        try:
            ours = not report_path.is_symlink() and _is_engine_report(parse_json(report_path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            ours = False
        if not ours:
            raise ConfigurationError(f"{report_path}: exists and is not an engine report; refusing to overwrite it "
                                     "(move it or choose another --out)")
    check_replaceable(options.store_path)
    if out.is_dir():
        remove_dead_staged(out)


# Staged outputs of a run with pid P: ``.NAME.staged-P`` and, killed inside ``Tokenizer.save``, its
# temporary ``..tokenizer.json.staged-P.<random>.tmp``.
STAGED_PREFIXES = (".tokenizer.json.staged-", ".report.json.staged-", "..tokenizer.json.staged-")


# What a staged file begins with (a killed write may have stopped anywhere in it, even at 0 bytes).
_STAGED_CONTENT = {".tokenizer.json.staged-": b'{"format":"engine.tokenizer"',
                   "..tokenizer.json.staged-": b'{"format":"engine.tokenizer"',
                   ".report.json.staged-": b'{\n  "format": "' + REPORT_FORMAT.encode() + b'"'}
_STAGED_NAME = re.compile(r"(\.\.tokenizer\.json\.staged-|\.tokenizer\.json\.staged-|\.report\.json\.staged-)"
                          r"([0-9]{1,10})(\.[0-9a-f]{12}\.tmp)?")


def remove_dead_staged(out: Path) -> None:
    """Remove the staged outputs in ``out`` of runs that are dead (a live run's stay): only files named
    as ``stage_outputs`` names them whose content begins as it writes them (so, provably ours); any other
    file with such a name is refused by name (ConfigurationError), never removed."""
    for stale in out.iterdir():
        if not any(stale.name.startswith(p) for p in STAGED_PREFIXES):
            continue
        match = _STAGED_NAME.fullmatch(stale.name)
        if match and pid_alive(int(match[2])):
            continue
        expected = _STAGED_CONTENT[match[1]] if match and (match[1] == "..tokenizer.json.staged-") == bool(match[3]) \
            else None
        head = file_head(stale, len(expected)) if expected is not None else None
        if head is None or not expected.startswith(head):
            raise ConfigurationError(f"{stale}: named like a staged output of `engine prepare` but not one "
                                     "(not a file it writes); it is not ours to remove: move it away")
        stale.unlink(missing_ok=True)


def stage_outputs(options: PrepareOptions, tok: Tokenizer, tallies: dict[Partition, PartitionTally], *,
                  threads: int, seconds: dict[str, float] | None = None, read: ReadReport | None = None,
                  resume: dict | None = None, extra: dict | None = None) -> tuple[PrepareResult, list[tuple[Path, Path]]]:
    """Write ``tokenizer.json`` and ``report.json`` to hidden temporaries in ``--out`` (see
    ``finish_report``); returns the result and the (temporary, final) pairs ``commit_outputs`` renames."""
    out_dir = options.out_dir
    tokenizer_path, report_path = out_dir / "tokenizer.json", out_dir / "report.json"
    staged_tokenizer = out_dir / f".tokenizer.json.staged-{os.getpid()}"
    staged_report = out_dir / f".report.json.staged-{os.getpid()}"
    staged = [(staged_tokenizer, tokenizer_path), (staged_report, report_path)]
    try:
        tok.save(staged_tokenizer)
        report = _report(options, tok, tallies, tokenizer_path, threads=threads, seconds=seconds, read=read,
                         resume=resume)
        report.update(extra or {})  # e.g. "chat": what chat data prepare read, its template and wrappers
        staged_report.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except BaseException:
        drop_staged(staged)
        raise
    return PrepareResult(out_dir, options.store_path, tokenizer_path, report_path, report), staged


def commit_outputs(staged: list[tuple[Path, Path]]) -> None:
    """Rename the staged files into place, ``report.json`` last: the store is in place already, so a
    run killed between these renames leaves ``--out`` with a report (and maybe a tokenizer file) of the
    previous run beside the new store, which every reader of ``--out`` refuses
    (``engine.store.reader.check_output_set``) until a run completes."""
    for tmp, final in staged:
        stop_point("outputs")
        os.replace(tmp, final)


def drop_staged(staged: list[tuple[Path, Path]]) -> None:
    for tmp, _ in staged:
        tmp.unlink(missing_ok=True)


class StagedOutputs:
    """``tokenizer.json`` and ``report.json`` of one run, staged while the store is still being
    written (``stage``, called before the store is renamed into place) and renamed into ``--out``
    when the ``with`` block ends without an error; on any error (or an interrupt) they are removed,
    so a failed run of either executor changes nothing in ``--out``."""

    def __init__(self, options: PrepareOptions, *, threads: int):
        self.options, self.threads = options, threads
        self.result: PrepareResult | None = None
        self.files: list[tuple[Path, Path]] = []

    def stage(self, tok: Tokenizer, tallies: dict[Partition, PartitionTally], **report: Any) -> None:
        """Write both outputs to hidden temporaries (``report``: ``seconds``, ``read``, ``resume``, ``extra``)."""
        self.result, files = stage_outputs(self.options, tok, tallies, threads=self.threads, **report)
        self.files.extend(files)

    def __enter__(self) -> "StagedOutputs":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None:
                commit_outputs(self.files)
        except BaseException:
            drop_staged(self.files)
            raise
        if exc_type is not None:
            drop_staged(self.files)
        return False


def finish_report(options: PrepareOptions, tok: Tokenizer, tallies: dict[Partition, PartitionTally], *,
                  threads: int, seconds: dict[str, float] | None = None, read: ReadReport | None = None,
                  resume: dict | None = None) -> PrepareResult:
    """Save the tokenizer beside the store and write ``report.json`` (staged, then renamed).

    ``read`` (what the corpus reader counted: skipped lines and documents, replaced or dropped
    invalid UTF-8, made ids) goes to ``report["read"]``; ``report["warnings"]`` names partitions
    without complete windows and short documents.
    """
    with StagedOutputs(options, threads=threads) as outputs:
        outputs.stage(tok, tallies, seconds=seconds, read=read, resume=resume)
    return outputs.result


def _wrappers(options: PrepareOptions, tok: Tokenizer) -> dict:
    """The special tokens around each text document: ``[BOS, content..., EOS]``, or no BOS."""
    no_bos = options.without_bos or tok.bos_id is None
    bos = None if no_bos else getattr(tok, "bos", None)
    return {"bos": bos, "bos_id": None if no_bos else tok.bos_id,
            "eos": getattr(tok, "eos", None), "eos_id": tok.eos_id}


def _report(options: PrepareOptions, tok: Tokenizer, tallies: dict[Partition, PartitionTally], tokenizer_path: Path,
            *, threads: int, seconds: dict[str, float] | None, read: ReadReport | None, resume: dict | None) -> dict:
    report: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "corpus": str(options.corpus),
        "splits": str(options.splits) if options.splits is not None else None,
        "store": str(options.store_path),
        "tokenizer": {"kind": tok.kind, "path": str(tokenizer_path), "hash": tok.hash, "vocab_size": tok.vocab_size,
                      "bos_id": tok.bos_id, "eos_id": tok.eos_id, "notes": list(tok.notes)},
        "wrappers": _wrappers(options, tok),
        "context_length": options.context_length,
        "stride": options.stride,
        "threads": threads,
        "partitions": {p.value: vars(tallies[p]).copy() for p in PARTITIONS},
        "read": read.to_dict() if read is not None else None,
        "warnings": window_warnings(tallies, options.context_length),
        "seconds": {k: round(v, 3) for k, v in (seconds or {}).items()},
    }
    if resume is not None:
        report["resume"] = resume
    return report
