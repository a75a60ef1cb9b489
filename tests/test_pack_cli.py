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
