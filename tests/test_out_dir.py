"""engine prepare --out DIR replaces only what engine wrote there, and a failed run changes nothing."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.pipeline import prepare
from tests.fakes import fail_saves_into
from tests.helpers import run


def run_prepare(out, *extra):
    return CliRunner().invoke(main, ["prepare", "--out", str(out), "--tokenizer", "char", "--context", "8",
                                     "--threads", "1", "--quiet", *extra])


def snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_foreign_tokenizer_json_is_not_overwritten(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": {}}}')
    result = run_prepare(out)
    assert result.exit_code == 2
    assert result.output == (f"error: {out / 'tokenizer.json'}: exists and is not an engine tokenizer file "
                             "(TokenizerError); refusing to overwrite it (move it or choose another --out)\n")
    assert snapshot(out) == {"tokenizer.json": b'{"version": "1.0", "model": {"type": "BPE", "vocab": {}}}'}


def test_an_engine_tokenizer_with_a_wrong_hash_is_not_overwritten(tmp_path):
    out = tmp_path / "out"
    assert run_prepare(out).exit_code == 0
    data = json.loads((out / "tokenizer.json").read_text())
    data["hash"] = "0" * len(data["hash"])
    (out / "tokenizer.json").write_text(json.dumps(data))
    before = snapshot(out)
    result = run_prepare(out)
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {out / 'tokenizer.json'}: exists and is not an engine tokenizer file")
    assert snapshot(out) == before


def test_a_foreign_report_json_is_not_overwritten(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text('{"quarterly": "numbers"}')
    result = run_prepare(out)
    assert result.exit_code == 2
    assert result.output == (f"error: {out / 'report.json'}: exists and is not an engine report; refusing to "
                             "overwrite it (move it or choose another --out)\n")
    assert snapshot(out) == {"report.json": b'{"quarterly": "numbers"}'}


def test_a_report_without_the_format_marker_is_still_recognised(tmp_path):
    out = tmp_path / "out"
    assert run_prepare(out).exit_code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["format"] == "engine.report"
    del report["format"]  # written before the marker existed
    (out / "report.json").write_text(json.dumps(report))
    assert run_prepare(out).exit_code == 0
    assert json.loads((out / "report.json").read_text())["format"] == "engine.report"


def test_a_store_folder_with_a_fake_manifest_is_not_replaced(tmp_path):
    out = tmp_path / "out"
    (out / "store").mkdir(parents=True)
    (out / "store" / "_engine.json").write_text("{}")
    (out / "store" / "thesis.tex").write_text("precious")
    result = run_prepare(out)
    assert result.exit_code == 2
    assert result.output == (f"error: {out / 'store' / '_engine.json'}: not a valid engine store manifest "
                             f'(no "format": "engine.token_store"); refusing to replace {out / "store"}\n')
    assert snapshot(out) == {"store/_engine.json": b"{}", "store/thesis.tex": b"precious"}


def test_a_store_holding_unlisted_files_is_not_replaced(tmp_path):
    out = tmp_path / "out"
    assert run_prepare(out).exit_code == 0
    (out / "store" / "notes.txt").write_text("mine")
    before = snapshot(out)
    result = run_prepare(out)
    assert result.exit_code == 2
    assert result.output == (f"error: {out / 'store' / 'notes.txt'}: not part of the token store at {out / 'store'} "
                             f"(its _engine.json does not list it); refusing to replace {out / 'store'}\n")
    assert snapshot(out) == before


def test_a_failed_tokenizer_write_changes_nothing(tmp_path, monkeypatch):
    out = tmp_path / "out"
    assert run_prepare(out).exit_code == 0
    before = snapshot(out)
    fail_saves_into(monkeypatch, out)
    with pytest.raises(OSError, match="injected"):  # a different tokenizer: every output would change
        prepare(None, None, out, tokenizer="word", context_length=4, threads=1, quiet=True)
    assert snapshot(out) == before
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "store", "tokenizer.json"]


def test_a_leftover_old_store_is_removed(tmp_path):
    out = tmp_path / "out"
    assert run_prepare(out).exit_code == 0
    (out / ".store.old-99999999").mkdir()
    (out / ".store.old-99999999" / "_engine.json").write_text("{}")
    assert run_prepare(out).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "store", "tokenizer.json"]


def leftovers_of(out, pid):
    """What a run with ``pid`` leaves in ``out`` when it is killed at any stage."""
    (out / f".report.json.staged-{pid}").write_text('{\n  "format": "engine.report", "cor')  # killed while writing
    (out / f".tokenizer.json.staged-{pid}").write_text("")
    (out / f"..tokenizer.json.staged-{pid}.0a1b2c3d4e5f.tmp").write_text('{"format":"engine.tok')  # in Tokenizer.save
    for folder in (f".store.old-{pid}", f".store.tmp-{pid}"):
        (out / folder).mkdir()
        (out / folder / "_engine.json").write_text("{}")
    return {f".report.json.staged-{pid}", f".tokenizer.json.staged-{pid}", f"..tokenizer.json.staged-{pid}.0a1b2c3d4e5f.tmp",
            f".store.old-{pid}", f".store.tmp-{pid}"}


def test_leftovers_of_killed_runs_are_removed_but_not_those_of_a_live_run(tmp_path):
    out = tmp_path / "out"
    assert run_prepare(out).exit_code == 0
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        dead_files = leftovers_of(out, finished.pid)
        live_files = leftovers_of(out, live.pid)
        (out / "store.lock").write_text(str(live.pid))  # the live run is writing the store
        result = run_prepare(out)
        assert result.exit_code == 2 and "store.lock" in result.output
        names = {p.name for p in out.iterdir()}
        # The dead run's staged outputs are gone; its store leftovers wait for the lock (the live run's
        # store folders are only touched by whoever holds the lock); the live run's files all stay.
        assert names == {"report.json", "store", "tokenizer.json", "store.lock", f".store.old-{finished.pid}",
                         f".store.tmp-{finished.pid}"} | live_files
    finally:
        live.kill()
        live.wait()
    assert run_prepare(out).exit_code == 0  # the live run died: everything it left is stale now
    assert sorted(p.name for p in out.iterdir()) == ["report.json", "store", "tokenizer.json"]
    assert dead_files.isdisjoint(p.name for p in out.iterdir())


@pytest.mark.parametrize("name, content", [
    ("store.lock", "do not delete: my notes\n"),  # not the lock's own format
    (".store.lock.99999999", "mine\n"),  # a draft's name, not a draft's content
    (".report.json.staged-99999999", "my report"),
    (".tokenizer.json.staged-99999999", '{"vocab": 1}'),
])
def test_files_named_like_leftovers_that_are_not_ours_are_refused_and_kept(tmp_path, name, content):
    out = tmp_path / "out"
    assert run_prepare(out).exit_code == 0
    (out / name).write_text(content)
    result = run_prepare(out)
    if name == ".store.lock.99999999":  # drafts are only cleared after the lock is taken: kept, the run completes
        assert result.exit_code == 0, result.output
    else:
        assert result.exit_code == 2, result.output
        assert name in result.output and "move it away" in result.output
    assert (out / name).read_text() == content


@pytest.mark.parametrize("folder", [".store.tmp-backup", ".store.old-2023", ".store.tmp-99999999"])
def test_folders_named_like_store_temporaries_holding_a_users_files_are_refused_and_kept(tmp_path, folder):
    out = tmp_path / "out"
    assert run_prepare(out).exit_code == 0
    (out / folder).mkdir()
    (out / folder / "thesis.tex").write_text("mine")
    result = run_prepare(out)
    assert result.exit_code == 2, result.output
    assert folder in result.output and "not provably one" in result.output
    assert (out / folder / "thesis.tex").read_text() == "mine"


# -- a folder corpus that holds the outputs of runs over it --------------------------------------


def folder_corpus(root):
    (root / "docs").mkdir(parents=True)
    for i, text in enumerate(["abc cab", "bca abc", "cab bca"]):
        (root / "docs" / f"{i}.txt").write_text(text)
    (root / "top.txt").write_text("acb bac")
    return root


def store_ids(out):
    from engine.store import TokenStore

    store = TokenStore.open(out)  # the prepare output folder opens as its store
    return {split: store.ids(split) for split in ("train", "validation", "test")}


def test_a_folder_corpus_leaves_out_prepare_outputs_inside_it(tmp_path, monkeypatch):
    corpus = folder_corpus(tmp_path / "corpus")
    monkeypatch.chdir(corpus)  # --out defaults to out/, inside the corpus
    args = ["prepare", ".", "--hash-split", "0.5,0.25,0.25", "--tokenizer", "char", "--context", "4", "--threads",
            "1", "--quiet"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    ids = store_ids(corpus / "out")
    assert sorted(i for part in ids.values() for i in part) == ["docs/0.txt", "docs/1.txt", "docs/2.txt", "top.txt"]
    # a second run over the same folder (which now holds out/store, out/report.json, out/tokenizer.json) and a
    # run writing elsewhere both read the same four documents
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert store_ids(corpus / "out") == ids
    elsewhere = CliRunner().invoke(main, [*args, "--out", "other"])
    assert elsewhere.exit_code == 0, elsewhere.output
    assert store_ids(corpus / "other") == ids
    # a copy of a bare store (no prepare folder around it) is left out too
    import shutil

    shutil.copytree(corpus / "out" / "store", corpus / "docs" / "kept-store")
    third = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "outside")])
    assert third.exit_code == 0, third.output
    assert store_ids(tmp_path / "outside") == ids


@pytest.mark.parametrize("name, content", [("store.lock", "notes\n"), ("store.lock", "0\n"), ("_engine.json", "{}\n"),
                                           ("store/_engine.json", '{"format": "mine"}\n')])
def test_a_users_file_named_like_an_engine_output_leaves_its_folder_in_the_corpus(tmp_path, name, content):
    """A folder is left out of a folder corpus only when it holds engine's output in engine's formats
    (a store manifest as the writer begins it, a lock holding a pid): a user's ``store.lock`` of notes or
    an ``_engine.json`` of their own keeps the folder's documents in the corpus."""
    corpus = folder_corpus(tmp_path / "corpus")
    (corpus / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
    (corpus / "docs" / name).write_text(content, encoding="utf-8")
    result = CliRunner().invoke(main, ["prepare", str(corpus), "--hash-split", "0.5,0.25,0.25", "--tokenizer", "char",
                                       "--context", "4", "--threads", "1", "--quiet", "--out", str(tmp_path / "o"),
                                       "--corpus-format", "folder"])  # every file a text document, .json too
    assert result.exit_code == 0, result.output
    ids = sorted(i for part in store_ids(tmp_path / "o").values() for i in part)
    assert ids == sorted(["docs/0.txt", "docs/1.txt", "docs/2.txt", "top.txt", f"docs/{name}"])


def test_engine_splits_leaves_out_its_own_manifest_inside_the_folder(tmp_path):
    corpus = folder_corpus(tmp_path / "corpus")
    for _ in range(2):
        result = CliRunner().invoke(main, ["splits", str(corpus), "--hash-split", "0.5,0.25,0.25", "--out",
                                           str(corpus / "splits.json"), "--force"])
        assert result.exit_code == 0, result.output
        listed = json.loads((corpus / "splits.json").read_text())
        assert sorted(i for ids in listed.values() for i in ids) == ["docs/0.txt", "docs/1.txt", "docs/2.txt",
                                                                   "top.txt"]


def test_iter_folder_exclude_names_folders_and_files(tmp_path):
    from engine.corpus.readers import iter_folder

    corpus = folder_corpus(tmp_path / "corpus")
    kept = [d.id for d in iter_folder(corpus, exclude=[corpus / "docs", corpus / "top.txt"])]
    assert kept == []
    kept = [d.id for d in iter_folder(corpus, exclude=[corpus / "docs" / "1.txt"])]
    assert kept == ["docs/0.txt", "docs/2.txt", "top.txt"]
    (corpus / "docs" / "store.lock").write_text("123")  # a folder where prepare is writing its store
    assert [d.id for d in iter_folder(corpus)] == ["top.txt"]


def test_out_cannot_be_the_corpus_folder_itself(tmp_path):
    corpus = folder_corpus(tmp_path / "corpus")
    before = sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*"))
    result = run("prepare", corpus, "--out", corpus, "--hash-split", "0.5,0.25,0.25")
    assert result.exit_code == 2 and "is the corpus folder itself" in result.output, result.output
    assert sorted(p.relative_to(corpus).as_posix() for p in corpus.rglob("*")) == before  # nothing written
