"""engine prepare --resume: an interrupted run's finished files are kept, the rest is encoded, and the
result equals a fresh run byte for byte (store manifest with every file's sha256, and report numbers)."""

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.pipeline import PrepareLimits, default_corpus_paths, prepare
from engine.store import TokenStore, TokenStoreWriter


# Small files, row groups and chunks, so an interrupted run leaves several finished files.
SMALL_FILES = PrepareLimits(store_file_rows=4, store_row_group_rows=2, encode_chunk_documents=3)
RUN = dict(tokenizer="char", context_length=8, threads=2, limits=SMALL_FILES)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def interrupt_after(monkeypatch, chunks: int):
    """Make the writer die after ``chunks`` chunks the way SIGKILL leaves it: temp dir kept, no lock."""
    real_abort = TokenStoreWriter.abort
    restore_write = interrupt_with_ctrl_c_after(monkeypatch, chunks)

    def abort(self):
        for out in self._outputs.values():
            if out.writer is not None:
                out.writer.close()  # its footer makes it readable, but it is short: resume must drop it
        self._lock.release()
        os.rename(self.tmp, self.tmp.with_name(f".store.tmp-{dead_pid()}"))

    monkeypatch.setattr(TokenStoreWriter, "abort", abort)
    return lambda: (restore_write(), monkeypatch.setattr(TokenStoreWriter, "abort", real_abort))


def resume_lines(err: str) -> str:
    """The ``resume:`` lines of stderr (the progress lines of a run without --quiet left out)."""
    return "".join(line + "\n" for line in err.splitlines() if line.startswith("resume:"))


def manifest(out):
    return json.loads((out / "store" / "_engine.json").read_text())


@pytest.mark.parametrize("chunks", [0, 4, 11])
def test_resume_equals_fresh_run(tmp_path, monkeypatch, chunks):
    corpus, splits = default_corpus_paths()
    fresh = prepare(corpus, splits, tmp_path / "fresh", **RUN, quiet=True)

    out = tmp_path / "out"
    restore = interrupt_after(monkeypatch, chunks)
    with pytest.raises(KeyboardInterrupt):
        prepare(corpus, splits, out, **RUN, quiet=True)
    restore()
    assert not (out / "store").exists()
    leftover = [p for p in out.iterdir() if p.name.startswith(".store.tmp-")]
    assert len(leftover) == 1
    # Complete files hold exactly store_file_rows rows; the cut one (fewer rows) must be redone.
    kept = set()
    for file in sorted(leftover[0].glob("split=*/part-*.parquet")):
        table = pq.read_table(file)
        if table.num_rows == 4:
            kept.update(table.column("id").to_pylist())

    written = []
    real_write = TokenStoreWriter.write_chunk
    monkeypatch.setattr(TokenStoreWriter, "write_chunk",
                        lambda self, part, ids, *a, **k: (written.extend(ids), real_write(self, part, ids, *a, **k)))
    resumed = prepare(corpus, splits, out, **RUN, resume=True, quiet=True)

    assert manifest(out) == manifest(tmp_path / "fresh")
    assert resumed.report["partitions"] == fresh.report["partitions"]
    TokenStore.open(out / "store").verify()
    assert (len(kept) > 0) == (chunks > 1)
    assert sorted(written) == sorted(set(TokenStore.open(out / "store").ids("train")
                                         + TokenStore.open(out / "store").ids("validation")
                                         + TokenStore.open(out / "store").ids("test")) - kept)
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_resume_flag_on_the_cli(tmp_path):
    result = CliRunner().invoke(main, ["prepare", "--out", str(tmp_path / "o"), "--tokenizer", "char", "--resume",
                                       "--quiet", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["partitions"]["train"]["documents"] == 39
    bad = CliRunner().invoke(main, ["prepare", "--resume", "--executor", "ray", "--out", str(tmp_path / "r")])
    assert bad.exit_code == 2 and "--resume applies to --executor local only" in bad.output


def numba_interrupt() -> SystemError:
    """What SIGINT raises when it arrives while a Numba kernel runs on the main thread."""
    try:
        raise SystemError("CPUDispatcher(<function encode_bytes>) returned a result with an exception set") \
            from KeyboardInterrupt()
    except SystemError as exc:
        return exc


def interrupt_with_ctrl_c_after(monkeypatch, chunks: int, raised=KeyboardInterrupt):
    """Raise ``raised`` (KeyboardInterrupt, what SIGINT raises) in the writer after ``chunks`` chunks;
    nothing else patched."""
    real_write = TokenStoreWriter.write_chunk
    calls = [0]

    def write_chunk(self, *args, **kwargs):
        if calls[0] == chunks:
            raise raised() if callable(raised) and not isinstance(raised, BaseException) else raised
        calls[0] += 1
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(TokenStoreWriter, "write_chunk", write_chunk)
    return lambda: monkeypatch.setattr(TokenStoreWriter, "write_chunk", real_write)


def reversed_corpus(path):
    """The bundled corpus with every text reversed: same ids, same characters and counts (so the same
    char tokenizer), different documents."""
    corpus, _ = default_corpus_paths()
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    path.write_text("".join(json.dumps({"id": r["id"], "text": r["text"][::-1]}) + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("raised", [KeyboardInterrupt, numba_interrupt], ids=["python", "during-a-kernel"])
def test_ctrl_c_keeps_finished_files_and_resume_says_what_it_kept(tmp_path, monkeypatch, capsys, raised):
    corpus, splits = default_corpus_paths()
    fresh = prepare(corpus, splits, tmp_path / "fresh", **RUN, quiet=True)
    out = tmp_path / "out"
    restore = interrupt_with_ctrl_c_after(monkeypatch, 11, raised if raised is KeyboardInterrupt else raised())
    with pytest.raises(KeyboardInterrupt):  # also one that arrived during a kernel
        prepare(corpus, splits, out, **RUN, quiet=True)
    restore()
    assert not (out / "store").exists() and not (out / "store.lock").exists()
    leftover = [p for p in out.iterdir() if p.name.startswith(".store.tmp-")]
    assert len(leftover) == 1
    files = sorted(str(p.relative_to(leftover[0])) for p in leftover[0].rglob("*.parquet"))
    assert files == [f"split=train/part-{i:05d}.parquet" for i in range(6)]  # the cut seventh file is gone
    recorded = json.loads((leftover[0] / "_resume.json").read_text())["files"]
    assert sorted(recorded) == files and all(len(v["source_sha256"]) == 64 and v["rows"] == 4
                                             for v in recorded.values())
    capsys.readouterr()

    resumed = prepare(corpus, splits, out, **RUN, resume=True, quiet=False)
    err = resume_lines(capsys.readouterr().err)
    assert err == ("resume: kept 6 files (24 documents) of train, 0 files (0 documents) of validation, "
                   "0 files (0 documents) of test\n")
    assert resumed.report["resume"] == {"kept": {"train": {"files": 6, "documents": 24},
                                                 "validation": {"files": 0, "documents": 0},
                                                 "test": {"files": 0, "documents": 0}}}
    assert manifest(out) == manifest(tmp_path / "fresh")
    assert resumed.report["partitions"] == fresh.report["partitions"]
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    assert not (out / "store" / "_resume.json").exists()


def test_resume_on_a_changed_corpus_starts_afresh_and_says_why(tmp_path, monkeypatch, capsys):
    corpus_a, splits = default_corpus_paths()
    corpus_b = reversed_corpus(tmp_path / "b.jsonl")
    fresh_b = prepare(corpus_b, splits, tmp_path / "fresh", **RUN, quiet=True)

    out = tmp_path / "out"
    restore = interrupt_after(monkeypatch, 11)  # SIGKILL-like leftover built from corpus A
    with pytest.raises(KeyboardInterrupt):
        prepare(corpus_a, splits, out, **RUN, quiet=True)
    restore()
    leftover = [p for p in out.iterdir() if p.name.startswith(".store.tmp-")]
    assert len(leftover) == 1 and len(list(leftover[0].glob("split=train/part-*.parquet"))) >= 2
    capsys.readouterr()

    written = []
    real_write = TokenStoreWriter.write_chunk
    monkeypatch.setattr(TokenStoreWriter, "write_chunk",
                        lambda self, part, ids, *a, **k: (written.extend(ids), real_write(self, part, ids, *a, **k)))
    resumed = prepare(corpus_b, splits, out, **RUN, resume=True, quiet=False)
    why = "train file part-00000.parquet was encoded from other documents (their ids or text differ from this corpus)"
    assert resume_lines(capsys.readouterr().err) == f"resume: starting afresh: {why}\n"
    assert resumed.report["resume"] == {"kept": None, "started_afresh": why}
    assert manifest(out) == manifest(tmp_path / "fresh")
    assert resumed.report["partitions"] == fresh_b.report["partitions"]
    assert len(written) == 49  # every document encoded again
    TokenStore.open(out / "store").verify()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


@pytest.fixture
def interrupted(tmp_path, monkeypatch):
    """(corpus, splits, out) of a run stopped by Ctrl-C after 11 chunks."""
    corpus, splits = default_corpus_paths()
    out = tmp_path / "out"
    restore = interrupt_with_ctrl_c_after(monkeypatch, 11)
    with pytest.raises(KeyboardInterrupt):
        prepare(corpus, splits, out, **RUN, quiet=True)
    restore()
    return corpus, splits, out


def test_resume_refuses_files_without_a_record_of_their_documents(interrupted, capsys):
    corpus, splits, out = interrupted
    leftover = next(p for p in out.iterdir() if p.name.startswith(".store.tmp-"))
    (leftover / "_resume.json").unlink()  # e.g. left by a writer that was not given the documents
    capsys.readouterr()
    resumed = prepare(corpus, splits, out, **RUN, resume=True, quiet=False)
    why = "train file part-00000.parquet has no record of the documents it was encoded from"
    assert resume_lines(capsys.readouterr().err) == f"resume: starting afresh: {why}\n"
    assert resumed.report["resume"] == {"kept": None, "started_afresh": why}


def test_resume_with_another_piece_chars_starts_afresh_and_says_why(interrupted, capsys):
    """piece_chars can change ids (a long stretch with no break is cut at it), so files encoded with
    another value are not kept: the run starts afresh, naming both values."""
    import dataclasses

    corpus, splits, out = interrupted
    capsys.readouterr()
    other = {**RUN, "limits": dataclasses.replace(SMALL_FILES, piece_chars=1000)}
    resumed = prepare(corpus, splits, out, **other, resume=True, quiet=False)
    why = (f"the interrupted run encoded with piece_chars={SMALL_FILES.piece_chars}, this one with piece_chars=1000 "
           "(a long stretch with no break would be cut elsewhere)")
    assert resume_lines(capsys.readouterr().err) == f"resume: starting afresh: {why}\n"
    assert resumed.report["resume"] == {"kept": None, "started_afresh": why}
    TokenStore.open(out / "store").verify()


def test_quiet_resume_prints_nothing(interrupted, capsys):
    corpus, splits, out = interrupted
    capsys.readouterr()
    resumed = prepare(corpus, splits, out, **RUN, resume=True, quiet=True)
    assert capsys.readouterr().err == ""
    assert resumed.report["resume"]["kept"]["train"] == {"files": 6, "documents": 24}
