"""``engine prepare``: the main job (corpus -> tokenizer -> store -> window counts -> report.json)."""

from __future__ import annotations

import json

import click

from engine.commands._messages import cli_spelling
from engine.commands._options import column_options, corpus_format_option, json_option, split_options
from engine.corpus.fit_sample import describe_fit_sample
from engine.corpus.readers import INVALID_UTF8_POLICIES
from engine.chat.encode import TRAIN_ON
from engine.chat.records import FORMATS
from engine.prepare_options import EXECUTORS
from engine.tokenizers.base import TIE_BREAKS
from engine.tokenizers.pretokenize import PATTERN_NAMES
from engine.tokenizers.type_table import describe_max_types


def format_table(headers: list[str], rows: list[list]) -> str:
    """A plain aligned text table: first column left, the rest right-aligned."""
    cells = [headers] + [[f"{v:,}" if isinstance(v, int) else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        line = "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        lines.append(line.rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fittable() -> str:
    from engine.tokenizers.base import fittable_kinds

    return ", ".join(fittable_kinds())


def chat_options(fn):
    """Chat and instruction data: --format, its columns, --chat-template, --train-on, --bos/--eos."""
    for option in reversed([
        click.option("--format", "format", type=click.Choice(list(FORMATS)), default=None,
                     help="What each record holds: text, messages (a chat) or prompt-completion [default: detected "
                          "from the first record: a messages field, else prompt and completion fields, else text]. "
                          "Example: --format messages --tokenizer Qwen2.5-0.5B-Instruct/"),
        click.option("--messages-column", "messages_column", metavar="NAME", default="messages", show_default=True,
                     help="Field holding the list of {role, content} messages (--format messages)."),
        click.option("--prompt-column", "prompt_column", metavar="NAME", default="prompt", show_default=True,
                     help="Field holding the prompt: a text, or a list of messages (--format prompt-completion)."),
        click.option("--completion-column", "completion_column", metavar="NAME", default="completion",
                     show_default=True, help="Field holding the completion (--format prompt-completion)."),
        click.option("--chat-template", "chat_template", metavar="FILE", default=None,
                     help="Jinja2 chat template: FILE.jinja or a tokenizer_config.json [default: the tokenizer "
                          "folder's tokenizer_config.json]. Example: --chat-template qwen2_5_training.jinja"),
        click.option("--train-on", "train_on", type=click.Choice(list(TRAIN_ON)), default="assistant",
                     show_default=True,
                     help="Tokens scored: every assistant message, only the last one, or all tokens. "
                          "Example: --train-on last-assistant"),
        click.option("--bos", default=None, metavar="TOKEN|none",
                     help="Special token before each document or prompt/completion example, or none (documents are "
                          "[content..., EOS]) [default: the tokenizer_config.json's bos_token beside the tokenizer, "
                          "else the tokenizer's own]. Example: --bos none"),
        click.option("--eos", default=None, metavar="TOKEN",
                     help="Special token after each document or prompt/completion example [default: the "
                          "tokenizer_config.json's eos_token, else the tokenizer's own]. Example: --eos '<|im_end|>'"),
    ]):
        fn = option(fn)
    return fn


@click.command("prepare")
@click.argument("corpus", required=False, type=click.Path(path_type=str))
@split_options
@column_options
@corpus_format_option
@chat_options
@click.option("--out", "out_dir", default="out", show_default=True, type=click.Path(path_type=str),
              help="Output directory (store/, tokenizer.json, report.json).")
@click.option("--tokenizer", default="bpe", show_default=True, metavar="KIND|FILE",
              help=f"A kind to fit on the train partition ({_fittable()}), or the path of a tokenizer file to encode "
                   "with (engine, Hugging Face tokenizer.json, tiktoken, SentencePiece .model).")
@click.option("--merges", default=None, type=int,
              help="BPE merges to train (bpe, byte-bpe; default 200 unless --vocab-size is given).")
@click.option("--vocab-size", "vocab_size", default=None, type=int,
              help="BPE vocabulary size to stop at, specials included (bpe, byte-bpe).")
@click.option("--pattern", default=None, metavar="NAME|REGEX",
              help=f"Byte-level pre-tokenizer (byte-bpe; default gpt2), or the one a tiktoken file uses: "
                   f"{', '.join(PATTERN_NAMES)} or any regex, e.g. "
                   "--pattern '\\p{L}+|\\p{N}{1,3}|\\s+|[^\\s\\p{L}\\p{N}]+'.")
@click.option("--tie-break", "tie_break", type=click.Choice(list(TIE_BREAKS)), default=None,
              help="Equally frequent pairs: first (first occurrence) or hf (Hugging Face's order); "
                   "default first (bpe, byte-bpe).")
@click.option("--fit-sample", "fit_sample", default=None, metavar="BYTES",
              help="Fit on the first BYTES UTF-8 bytes of the train partition only: its documents in corpus order, "
                   "the one that crosses BYTES cut at a character (the same sample for any --threads; held-out "
                   "documents never count). A number of bytes or with a unit: 64MB, 1GiB. The summary and "
                   "report.json say what the sample held. Example: --fit-sample 1GB")
@click.option("--max-types", "max_types", default=None, type=int, metavar="N",
              help="Fit on the N most frequent types only (pieces, words; ties by first appearance; word, "
                   "byte-bpe): bounds what the fit builds from the type table. The summary and report.json say "
                   "how many were dropped. Example: --max-types 1000000")
@click.option("--context", "context_length", default=None, type=int,
              help="Context length T for window counts [default: 64; 32 for the bundled corpus, whose "
                   "documents are short].")
@click.option("--stride", default=1, show_default=True, type=int, help="Stride S between window starts.")
@click.option("--on-invalid-utf8", type=click.Choice(list(INVALID_UTF8_POLICIES)), default="error", show_default=True,
              help="What to do with bytes that are not UTF-8: replace each invalid sequence by U+FFFD, or skip the "
                   "document (a continuous .txt loses only the invalid sequences); counted in the summary and "
                   "report.json.")
@click.option("--skip-bad-lines", is_flag=True,
              help="Skip malformed JSONL lines (and Parquet/Arrow rows with a null text or id) instead of failing; "
                   "counted in the summary and report.json.")
@click.option("--threads", type=int, default=None,
              help="Threads for counting and encoding (default: $ENGINE_THREADS, else all cores).")
@click.option("--executor", type=click.Choice(list(EXECUTORS)), default="local", show_default=True,
              help="local: threads on this machine; ray: Ray Data on a cluster (pip install 'engine[distributed]').")
@click.option("--ray-address", "ray_address", default=None, metavar="ADDR",
              help="Ray cluster to join with --executor ray (e.g. auto, ray://host:10001); default: start a local one.")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted run over the same --out: keep its finished files, encode the rest.")
@json_option
@click.option("--quiet", is_flag=True, help="No progress on stderr.")
def command(corpus, splits, hash_split, train_fraction, as_json, **options):
    """Fit a tokenizer on the training partition, encode every document, write the store.

    CORPUS is a .jsonl (plain or .gz/.zst/.bz2/.xz), .parquet or Arrow IPC (.arrow/.feather) file,
    a folder or quoted glob of such shards (read in sorted order as one corpus), a datasets
    save_to_disk folder, a folder of text files, or one continuous .txt file (split by position).
    Without CORPUS the bundled data/corpus.jsonl and data/splits.json are used.
    Writes OUT/store (Parquet, partitioned by split), OUT/tokenizer.json and OUT/report.json, and
    prints documents, characters, tokens and complete windows (context T, stride S) per partition;
    "short" counts the documents shorter than T+1 tokens (they give no window) and "tails" the
    documents that end in an incomplete tail (the suffix at the first candidate start that cannot
    fill a window; the rule of engine.windows).
    The corpus is streamed twice (count the train partition and fit, then encode), so it need not
    fit in memory. --tokenizer byte-bpe trains a byte-level BPE (GPT-2 style: any text encodes, so
    held-out documents never stop the run); char, word and bpe stop on a held-out character their
    training text lacked.
    Skipped lines and documents, replaced or dropped invalid UTF-8 and ids made from file and row
    are counted in the summary and report.json; a partition without any complete window is warned
    about on stderr (with --json: in its "warnings").

    \b
    Example:
      engine prepare
      engine prepare corpus.jsonl --splits splits.json --out out --context 256
      engine prepare corpus.jsonl --hash-split 0.98,0.01,0.01 --tokenizer byte-bpe --vocab-size 32768
      engine prepare corpus.jsonl --hash-split 0.98,0.01,0.01 --tokenizer byte-bpe --vocab-size 4096 \\
        --pattern cl100k --tie-break hf
      engine prepare data/tinyshakespeare.txt --tokenizer char --train-fraction 0.9 --json
      engine prepare big.jsonl --hash-split 0.98,0.01,0.01 --tokenizer tokenizer.json --threads 16
      engine prepare pages.parquet --hash-split 0.98,0.01,0.01 --text-column body --id-column url
      engine prepare 'shards/*.jsonl.zst' --hash-split 0.98,0.01,0.01 --text-column meta.body
      engine prepare shards/ --corpus-format jsonl --hash-split 0.98,0.01,0.01
      engine prepare big.jsonl --hash-split 0.98,0.01,0.01 --resume    # after an interruption
      engine prepare big.parquet --hash-split 0.98,0.01,0.01 --executor ray --ray-address auto
      engine prepare chats.jsonl --hash-split 0.9,0.05,0.05 --tokenizer model/ --format messages
      engine prepare pairs.parquet --hash-split 0.9,0.05,0.05 --tokenizer model/ --train-on all --bos none
    """
    from engine.pipeline import prepare  # PrepareOptions(**these options), run on their executor

    result = prepare(corpus, splits, hash_split=hash_split, train_fraction=train_fraction, **options)
    report = result.report
    if as_json:  # the warnings are in the JSON ("warnings")
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    for warning in report["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    tok = report["tokenizer"]
    click.echo(f"tokenizer: {tok['kind']}, vocabulary {tok['vocab_size']:,}, hash {tok['hash'][:16]}")
    for note in tok["notes"]:
        click.echo(f"note: {note}")
    _echo_fit_sample(report.get("fit_sample"))
    if report.get("max_types") is not None:
        click.echo(describe_max_types(report["max_types"]))
    _echo_read(report["read"])
    if report.get("chat") is None and "wrappers" in report:
        w = report["wrappers"]
        bos = "none" if w["bos_id"] is None else f"{w['bos'] or '?'} ({w['bos_id']})"
        click.echo(f"wrappers: bos {bos}, eos {w['eos'] or '?'} ({w['eos_id']})")
    _echo_chat(report.get("chat"))
    click.echo(f"windows: context {report['context_length']}, stride {report['stride']}")
    rows = []
    for name, p in report["partitions"].items():
        rows.append([name, p["documents"], p["characters"], p["tokens"], p["windows"], p["short_documents"],
                     p["incomplete_tails"]])
    total = ["total"] + [sum(r[i] for r in rows) for i in range(1, 7)]
    click.echo(format_table(["partition", "documents", "characters", "tokens", "windows", "short", "tails"],
                            rows + [total]))
    click.echo(f"wrote {result.store_path}, {result.tokenizer_path}, {result.report_path}")


def _echo_fit_sample(sample: dict | None) -> None:
    """What the tokenizer was fitted on, when --fit-sample bounded it."""
    if sample is not None:
        click.echo(describe_fit_sample(sample))


def _echo_chat(chat: dict | None) -> None:
    """What chat data was read with: template, what is scored, the wrapper tokens, counts."""
    if chat is None:
        return
    template = chat["template"] or "none"
    markers = ", {% generation %} markers" if chat["generation_markers"] else ""
    click.echo(f"chat: {chat['format']}, template {template}{markers}, train on {chat['train_on']}")
    bos = "none" if chat["bos"] is None else f"{chat['bos']} ({chat['bos_id']})"
    eos = "none" if chat["eos"] is None else f"{chat['eos']} ({chat['eos_id']})"
    click.echo(f"wrappers: bos {bos}, eos {eos}" + (" (prompt/completion examples; a chat is its rendering)"
                                                      if chat["format"] == "prompt-completion" else
                                                      " (unused: a chat document is its template's rendering)"))
    line = f"examples: {chat['examples']:,}, scored tokens {chat['scored_tokens']:,}"
    if chat["format"] == "prompt-completion":
        line += f", {chat['joint_encoding_differs']:,} would differ if prompt and completion were encoded joined"
    click.echo(line)


def _echo_read(read: dict | None) -> None:
    """How the corpus was read: notes (made ids) and every count of what was skipped, replaced or dropped."""
    if read is None:
        return
    for note in read["notes"]:
        click.echo(f"note: {note}")
    counted = ("skipped_bad_lines", "skipped_invalid_utf8_documents", "replaced_invalid_utf8_sequences",
               "dropped_invalid_utf8_sequences")
    if any(read[key] for key in counted):
        click.echo(read["summary"])
        for problem in read["first_problems"]:
            click.echo(f"  {cli_spelling(problem)}")
