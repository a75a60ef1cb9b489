"""Small helpers shared by several test files (one definition each)."""

from click.testing import CliRunner

from engine.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])
