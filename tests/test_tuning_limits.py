"""Tuning sizes are passed as limits, never patched: no test (or helper script) names one of the
module globals below to set it (``monkeypatch.setattr``, ``setattr``, ``monkeypatch.setitem`` on a
module's ``__dict__``, an assignment). The values are arguments: ``ReadLimits`` (corpus readers),
``PrepareLimits`` (a ``prepare`` run), ``encode_documents(stream_chars=...)``, ``TrainLimits``,
``PieceCacheLimits``, ``WordCacheLimits`` (tokenizers and trainers) and ``LoaderLimits``
(``TokenDataset``). A patched module global would be read by nothing now, so the test that patched
it would test nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from engine.corpus import ReadLimits
from engine.corpus.unique import SeenIds
from engine.errors import ConfigurationError
from engine.pipeline import PrepareLimits
from engine.tokenizers.limits import PieceCacheLimits, TrainLimits, WordCacheLimits

ROOT = Path(__file__).resolve().parent.parent
TUNING_NAMES = frozenset({
    "BUFFER_IDS", "LONG_LINE_BYTES", "LONG_STRING_BYTES", "PART_BYTES", "_BLOCK_BYTES", "SCAN_BLOCK_BYTES",
    "STREAM_CHARS", "PIECE_CACHE_SLOTS", "PIECE_CACHE_BYTES", "PIECE_CACHE_IDS", "BATCH_BYTES", "TRAIN_BATCH_BYTES",
    "WORD_CACHE_SLOTS", "CHUNK_IDS", "STAGE_IDS", "LONG_PIECE_WINDOW", "PIECE_CHARS",
})


def patched_tuning_names(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every place ``source`` names a tuning global to set it: a string that is the
    name, or a dotted path ending in it (what ``monkeypatch.setattr(obj, "NAME", v)``,
    ``monkeypatch.setattr("pkg.module.NAME", v)``, ``setattr(obj, name, v)`` over a list of names and
    ``monkeypatch.setitem(vars(obj), "NAME", v)`` need), and an assignment ``module.NAME = v``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value.rsplit(".", 1)[-1]
            if name in TUNING_NAMES and node.value.replace(".", "").replace("_", "").isalnum():
                found.append((node.lineno, name))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Attribute) and target.attr in TUNING_NAMES:
                    found.append((node.lineno, target.attr))
    return sorted(found)


def checked_files() -> list[Path]:
    """The tests (but this one, which names them to find them) and the helper scripts."""
    tests = [path for path in sorted((ROOT / "tests").rglob("*.py")) if path != Path(__file__).resolve()]
    return tests + sorted((ROOT / "scripts").rglob("*.py"))


def test_no_test_or_script_patches_a_tuning_name():
    files = checked_files()
    assert ROOT / "tests" / "test_long_lines.py" in files and ROOT / "scripts" / "fuzz.py" in files
    problems = [f"{path.relative_to(ROOT)}:{line}: sets {name}; pass the limit as an argument instead"
                for path in files for line, name in patched_tuning_names(path.read_text(encoding="utf-8"))]
    assert problems == []


@pytest.mark.parametrize("source, expected", [
    ('monkeypatch.setattr(streaming, "STREAM_CHARS", 50)', [(1, "STREAM_CHARS")]),
    ('monkeypatch.setattr("engine.torch.CHUNK_IDS", 8)', [(1, "CHUNK_IDS")]),
    ('for n, v in (("PART_BYTES", 3), ("_BLOCK_BYTES", 5)):\n    setattr(long_lines, n, v)',
     [(1, "PART_BYTES"), (1, "_BLOCK_BYTES")]),
    ('monkeypatch.setitem(vars(unique), "BUFFER_IDS", 4)', [(1, "BUFFER_IDS")]),
    ("byte_bpe.PIECE_CACHE_SLOTS = 64", [(1, "PIECE_CACHE_SLOTS")]),
    ('monkeypatch.setattr(unique, "id_hash", len)', []),  # a function, not a tuning size
    ("limits = PrepareLimits(stream_chars=50)", []),
    ('"""a span of STREAM_CHARS characters"""', []),  # prose that names one
])
def test_the_check_finds_each_way_of_patching(source, expected):
    assert patched_tuning_names(source) == expected


@pytest.mark.parametrize("make, arguments, message", [
    (ReadLimits, dict(part_bytes=0), "limits.part_bytes must be positive (>= 1), got 0"),
    (PrepareLimits, dict(stream_chars=-5), "limits.stream_chars must be positive (>= 1), got -5"),
    (PrepareLimits, dict(piece_chars=0), "limits.piece_chars must be positive (>= 1), got 0"),
    (PrepareLimits, dict(long_line_bytes=1.5), "limits.long_line_bytes must be an integer, got float 1.5"),
    (TrainLimits, dict(batch_bytes=0), "TrainLimits.batch_bytes must be positive (>= 1), got 0"),
    (PieceCacheLimits, dict(slots=96), "PieceCacheLimits.slots must be a power of two >= 64, got 96"),
    (WordCacheLimits, dict(slots=3), "WordCacheLimits.slots must be a power of two >= 1, got 3"),
    (SeenIds, dict(buffer_ids=0), "buffer_ids must be positive (>= 1), got 0"),
])
def test_limits_are_checked_on_construction(make, arguments, message):
    with pytest.raises(ConfigurationError) as info:
        make(**arguments)
    assert str(info.value) == message


def test_defaults_are_todays_sizes_and_stream_chars_is_checked_per_call():
    from engine.tokenizers.char import CharTokenizer

    assert ReadLimits() == ReadLimits(1 << 25, 1 << 20, 1 << 22, 1 << 23, 1 << 16)
    assert PrepareLimits().read_limits == ReadLimits()
    assert PrepareLimits(long_part_bytes=7).read_limits.part_bytes == 7
    assert (PrepareLimits().stream_chars, TrainLimits()) == (1 << 21, TrainLimits(1 << 21, 4 << 20))
    assert PrepareLimits().piece_chars == 1 << 22
    assert PieceCacheLimits() == PieceCacheLimits(1 << 17, 1 << 20, 1 << 18)
    assert WordCacheLimits() == WordCacheLimits(1 << 16)
    with pytest.raises(ConfigurationError, match=r"stream_chars must be positive \(>= 1\), got 0"):
        CharTokenizer("ab").encode_documents(["ab"], stream_chars=0)
    with pytest.raises(ConfigurationError, match=r"piece_chars must be positive \(>= 1\), got 0"):
        CharTokenizer("ab").encode_documents(["ab"], piece_chars=0)
