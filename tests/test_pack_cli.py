"""engine.commands.pack: `engine pack` writes packed rows and replaces only its own output."""

import pyarrow.parquet as pq
from click.testing import CliRunner

from engine.cli import main
from tests.helpers import small_store


# -- the CLI -------------------------------------------------------------------------------------------


def test_pack_output_survives_a_stale_previous_directory(tmp_path):
    small_store(tmp_path / "store")
    out = tmp_path / "packed"
    args = ["pack", str(tmp_path / "store"), "--row-length", "16", "--out", str(out)]
    assert CliRunner().invoke(main, args).exit_code == 0
    (tmp_path / ".packed.previous").mkdir()  # a run killed between its two renames left this
    (tmp_path / ".packed.previous" / "rows.parquet").write_text("stale")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert pq.read_table(out / "rows.parquet").num_rows > 0
    assert not (tmp_path / ".packed.previous").exists()


def test_pack_command_refuses_to_replace_a_directory_it_did_not_write(tmp_path):
    from click.testing import CliRunner

    from engine.cli import main
    from engine.corpus import Partition
    from engine.store import EncodedDocument, TokenStore
    from tests.fakes import ByteIdsTokenizer

    tok = ByteIdsTokenizer()
    documents = [EncodedDocument("a", Partition.TRAIN, tok.encode_document("hello world", "a"))]
    store = tmp_path / "store"
    TokenStore.write(store, {Partition.TRAIN: documents}, tok)
    before = sorted(p.name for p in store.iterdir())
    result = CliRunner().invoke(main, ["pack", str(store), "--row-length", "8", "--out", str(store)])
    assert result.exit_code == 2 and "--out" in result.output
    assert sorted(p.name for p in store.iterdir()) == before
    packed = tmp_path / "packed"
    for _ in range(2):  # an earlier pack output is replaced
        again = CliRunner().invoke(main, ["pack", str(store), "--row-length", "8", "--out", str(packed)])
        assert again.exit_code == 0, again.output
    assert sorted(p.name for p in packed.iterdir()) == ["rows.parquet", "segments.parquet"]


def _pack_args(tmp_path, out):
    small_store(tmp_path / "store")
    return ["pack", str(tmp_path / "store"), "--row-length", "16", "--out", str(out)]


def test_pack_out_onto_a_symbolic_link_is_refused_and_changes_nothing(tmp_path):
    real = tmp_path / "real"
    args = _pack_args(tmp_path, real)
    assert CliRunner().invoke(main, args).exit_code == 0
    link = tmp_path / "link"
    link.symlink_to(real)
    result = CliRunner().invoke(main, args[:-1] + [str(link)])
    assert result.exit_code == 2 and "is a symbolic link" in result.output and str(real) in result.output
    assert link.is_symlink() and sorted(p.name for p in real.iterdir()) == ["rows.parquet", "segments.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real", "store"]  # nothing left beside it
    assert CliRunner().invoke(main, args).exit_code == 0  # and later runs still work


def test_leftovers_of_dead_pack_runs_are_removed_only_when_provably_ours(tmp_path):
    out = tmp_path / "packed"
    args = _pack_args(tmp_path, out)
    assert CliRunner().invoke(main, args).exit_code == 0
    dead = 99999999  # no such pid
    ours = tmp_path / f".packed.staging-{dead}"
    ours.mkdir()
    (ours / ".engine-staging").touch()
    (ours / "rows.parquet").write_bytes(b"partial")
    unmarked = tmp_path / f".packed.staging-{dead - 1}"  # no marker: not provably ours
    unmarked.mkdir()
    (unmarked / "rows.parquet").write_bytes(b"user")
    foreign_previous = tmp_path / ".other.previous"  # another name's: never looked at
    foreign_previous.mkdir()
    (foreign_previous / "notes.txt").write_text("mine")
    assert CliRunner().invoke(main, args).exit_code == 0
    assert not ours.exists()
    assert (unmarked / "rows.parquet").read_bytes() == b"user" and (foreign_previous / "notes.txt").exists()


def test_a_previous_holding_a_users_files_is_left_alone(tmp_path):
    out = tmp_path / "packed"
    args = _pack_args(tmp_path, out)
    assert CliRunner().invoke(main, args).exit_code == 0
    (tmp_path / ".packed.previous").mkdir()
    (tmp_path / ".packed.previous" / "thesis.tex").write_text("mine")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and ".packed.previous: exists and is not an earlier `engine pack` output" in result.output
    assert (tmp_path / ".packed.previous" / "thesis.tex").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["rows.parquet", "segments.parquet"]


def test_pack_killed_between_its_renames_restores_the_earlier_output(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    from engine.testhook import STOP_AT_VARIABLE

    out = tmp_path / "packed"
    args = _pack_args(tmp_path, out)
    assert CliRunner().invoke(main, args).exit_code == 0
    before = pq.read_table(out / "rows.parquet")
    killed = subprocess.run([sys.executable, "-m", "engine", *args, "--seed", "3"], capture_output=True,
                            env={**os.environ, STOP_AT_VARIABLE: "pack-swap"})
    assert killed.returncode == -signal.SIGKILL
    assert not out.exists() and (tmp_path / ".packed.previous").is_dir()
    result = CliRunner().invoke(main, args)  # the next run restores, then replaces, the earlier output
    assert result.exit_code == 0, result.output
    assert pq.read_table(out / "rows.parquet").equals(before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["packed", "store"]
