"""Click options shared by several commands, so each is spelled, checked and explained once."""

from __future__ import annotations

from pathlib import Path

import click

from engine.corpus.shards import CORPUS_FORMATS
from engine.corpus.splits import PARTITIONS, parse_ratios
from engine.errors import ConfigurationError

SPLIT_NAMES = tuple(p.value for p in PARTITIONS)


def split_options(fn):
    """``--splits FILE``, ``--hash-split R,R,R`` and ``--train-fraction F``: how documents are assigned
    to train/validation/test. The command receives ``splits``, ``hash_split`` (parsed ratios or
    None) and ``train_fraction``; giving both --splits and --hash-split is an error."""

    def check_exclusive(ctx: click.Context, param: click.Parameter, value):
        if param.name == "hash_split":
            value = parse_ratios(value)
        other = "hash_split" if param.name == "splits" else "splits"
        if value is not None and ctx.params.get(other) is not None:
            raise ConfigurationError("--splits and --hash-split are alternatives: give one of them")
        return value

    fn = click.option("--train-fraction", default=0.9, show_default=True, type=float,
                      help="For one continuous .txt file: the leading share of characters that trains; the rest validates.")(fn)
    fn = click.option("--hash-split", "hash_split", metavar="R,R,R", callback=check_exclusive,
                      help="Assign documents by hashing their ids into train,validation,test ratios (e.g. 0.98,0.01,0.01).")(fn)
    fn = click.option("--splits", "splits", type=click.Path(dir_okay=False, path_type=str), callback=check_exclusive,
                      help="Split manifest JSON: {\"train\": [ids], \"validation\": [ids], \"test\": [ids]}.")(fn)
    return fn


def column_options(fn):
    """``--text-column NAME`` and ``--id-column NAME``: which fields of a JSONL or Parquet/Arrow corpus
    hold the text and the id. The command receives ``text_column`` ("text" unless given) and
    ``id_column`` (None unless given: the "id" field, or ids made from file and row without one)."""
    fn = click.option("--id-column", "id_column", metavar="NAME", default=None,
                      help='JSONL/Parquet/Arrow field holding the document id [default: "id"; without an "id" '
                           "field ids are made from file and row, e.g. corpus.jsonl:000001 for line 1, "
                           "a.parquet:000000 for row 0]. A named column must exist.")(fn)
    fn = click.option("--text-column", "text_column", metavar="NAME", default="text", show_default=True,
                      help="JSONL/Parquet/Arrow field holding the document text.")(fn)
    return fn


def corpus_format_option(fn):
    """``--corpus-format FORMAT``: read the corpus as jsonl, parquet, arrow or folder, whatever its
    suffixes say (the command receives ``corpus_format``, None unless given)."""
    return click.option("--corpus-format", "corpus_format", type=click.Choice(list(CORPUS_FORMATS)), default=None,
                        help="Read the corpus as this format instead of guessing it from suffixes (every file of a "
                             "folder or glob too; compression still follows the last suffix), e.g. "
                             "--corpus-format jsonl for shards named part-00000 [default: guess].")(fn)


def json_option(fn):
    """``--json``: print the result as JSON instead of a table (the command receives ``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of a table.")(fn)


def split_option(fn):
    """``--split NAME``: one partition of a token store, ``train`` unless given (the command receives ``split``)."""
    return click.option("--split", default=SPLIT_NAMES[0], show_default=True, type=click.Choice(SPLIT_NAMES),
                        help="The partition to read.")(fn)


def _store_path(ctx: click.Context, param: click.Parameter, value):
    """A store path, or the ``--out`` folder of ``engine prepare`` (whose store is ``OUT/store``)."""
    from engine.store.layout import store_location
    from engine.store.reader import check_output_folder

    resolved = store_location(value)
    if resolved != Path(value):
        check_output_folder(Path(value))  # the store, tokenizer.json and report.json of one run
    return resolved


def store_argument(fn):
    """The STORE argument: a token store directory, or the output folder of ``engine prepare``."""
    return click.argument("store_path", metavar="STORE", callback=_store_path)(fn)
