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
