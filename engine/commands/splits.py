"""``engine splits``: write a split manifest for a corpus, for people who want the lists on disk."""

from __future__ import annotations

import json
from pathlib import Path

import click

from engine.checks import check_out_file
from engine.commands._options import column_options, corpus_format_option, json_option
from engine.corpus.splits import parse_ratios
from engine.errors import ConfigurationError


@click.command("splits")
@click.argument("corpus", type=click.Path(path_type=Path))
@click.option("--hash-split", "hash_split", metavar="R,R,R", required=True,
              help="Train,validation,test ratios; each id goes where its hash falls (e.g. 0.98,0.01,0.01).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Manifest JSON to write: {\"train\": [ids], \"validation\": [ids], \"test\": [ids]}.")
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@column_options
@corpus_format_option
@json_option
def command(corpus: Path, hash_split: str, out_path: Path, force: bool, text_column: str, id_column: str | None,
            corpus_format: str | None, as_json: bool) -> None:
    """Assign every document of CORPUS to train/validation/test by hashing its id; write the manifest.

    The assignment is the same rule `engine prepare --hash-split` applies, so
    `prepare --splits OUT` and `prepare --hash-split R,R,R` give the same partitions. Ids are listed
    in corpus order.

    \b
    Example:
      engine splits corpus.jsonl --hash-split 0.98,0.01,0.01 --out splits.json
      engine splits pages.parquet --hash-split 0.98,0.01,0.01 --id-column url --out splits.json
      engine splits 'shards/*.jsonl.gz' --hash-split 0.98,0.01,0.01 --out splits.json
      engine prepare corpus.jsonl --splits splits.json
    """
    from engine.corpus import Corpus, ReadReport, SplitManifest, is_continuous_text

    if corpus_format is None and is_continuous_text(corpus):
        raise ConfigurationError(f"{corpus}: a continuous .txt text is one document, split by position "
                                 "(engine prepare --train-fraction), not by id")
    check_out_file(out_path, force=True, is_ours=bool, what="a split manifest")  # never a device node, FIFO or link
    if out_path.exists() and not force:
        raise ConfigurationError(f"{out_path} exists; pass --force to replace it")
    report = ReadReport()
    ids = corpus_ids(corpus, text_column=text_column, id_column=id_column, report=report, exclude=(out_path,),
                     corpus_format=corpus_format)
    Corpus.check_ids(ids)
    manifest = SplitManifest.by_hash(parse_ratios(hash_split)).assign(ids)
    manifest.to_json(out_path)
    counts = {p.value: n for p, n in manifest.counts().items()}
    notes = report.notes()
    if as_json:
        click.echo(json.dumps({"out": str(out_path), "documents": counts, "notes": notes}))
    else:
        for note in notes:
            click.echo(f"note: {note}")
        click.echo(", ".join(f"{name} {n:,}" for name, n in counts.items()) + f" documents; wrote {out_path}")


def corpus_ids(corpus: Path, *, text_column: str, id_column: str | None, report, exclude=(),
               corpus_format: str | None = None, limits=None) -> list[str]:
    """The ids of ``corpus`` in order, each checked unique as it is read. Only the ids are kept (the
    manifest lists them): texts are streamed past, and a long line's text is left in its file
    (``long_lines``; ``limits``: the readers' ``ReadLimits``, None: the defaults)."""
    from engine.corpus import ReadLimits
    from engine.corpus.readers import open_corpus

    return [doc.id for batch in open_corpus(corpus, text_column=text_column, id_column=id_column, report=report,
                                            long_lines=True, exclude=exclude, corpus_format=corpus_format,
                                            limits=limits if limits is not None else ReadLimits())
            for doc in batch]
