"""The executor of ``prepare`` for chat and instruction data (``--format messages|prompt-completion``).

One pass on one thread (rendering a Jinja template holds the interpreter): records are read in
order (``engine.chat.records``, every error names file:line and field), assigned their partition by
the split manifest or hash rule, rendered and tokenized with role flags (``engine.chat.encode``),
and written in chunks of ``limits.encode_chunk_documents`` per partition to a store with a
``roles`` column (``TokenStore.writer(..., roles=True, bos=False)``: a chat document is its
template's rendering, so the manifest names no BOS every document starts with). The window tallies and ``report.json``
are those of the text executor, plus ``report["chat"]``: the format, template, ``train_on``, the
wrapper tokens, examples, scored tokens, and (prompt/completion) how many examples would have
other ids if prompt and completion were encoded joined. ``tokenizer.json`` is the engine form of
the tokenizer used, staged and renamed with the report after the store commits.
"""

from __future__ import annotations

import time

import numpy as np

from engine.chat.encode import ChatEncoder, resolve_wrappers
from engine.chat.records import iter_records
from engine.chat.template import load_chat_template, read_tokenizer_config, special_token_strings
from engine.corpus import PARTITIONS, ManifestCheck
from engine.errors import ConfigurationError
from engine.outputs import PartitionTally, PrepareResult, StagedOutputs
from engine.prepare_options import PrepareOptions
from engine.progress import Progress
from engine.steps import chunk_tally
from engine.store import TokenStore

__all__ = ["run_chat", "chat_encoder"]


def chat_encoder(options: PrepareOptions, tok) -> tuple[ChatEncoder, dict]:
    """The encoder of a run and what the report says about it (template, wrappers, train_on)."""
    config_file = options.tokenizer_config
    config = read_tokenizer_config(config_file) if config_file is not None else None
    bos, bos_id, eos, eos_id = resolve_wrappers(tok, config, options.bos, options.eos, str(options.tokenizer))
    template = None
    needs_template = options.format == "messages" or options.chat_template is not None
    if not needs_template:  # prompt-completion: a template only when the examples are message lists
        needs_template = _conversational(options)
    if needs_template:
        source = options.chat_template or config_file
        if source is None:
            raise ConfigurationError(f"--format {options.format}: no chat template; pass --chat-template "
                                     "FILE.jinja|tokenizer_config.json or --tokenizer DIR with a tokenizer_config.json")
        strings = special_token_strings(config) if config is not None else {}
        strings.setdefault("bos_token", bos)
        strings.setdefault("eos_token", eos)
        template = load_chat_template(source, strings)
    encoder = ChatEncoder(tok, template, train_on=options.train_on, bos_id=bos_id, eos_id=eos_id, limits=options.limits)
    about = {"format": options.format, "template": template.name if template is not None else None,
             "generation_markers": bool(template is not None and template.has_generation),
             "train_on": options.train_on, "bos": bos, "bos_id": bos_id, "eos": eos, "eos_id": eos_id}
    return encoder, about


def _conversational(options: PrepareOptions) -> bool:
    for record in _records(options):
        return record.messages is not None
    return False


def _records(options: PrepareOptions):
    return iter_records(options.corpus, options.format, messages_column=options.messages_column,
                        prompt_column=options.prompt_column, completion_column=options.completion_column,
                        id_column=options.id_column)


def run_chat(options: PrepareOptions) -> PrepareResult:
    started = time.perf_counter()
    tok = options.load_tokenizer()
    encoder, about = chat_encoder(options, tok)
    check = ManifestCheck(options.manifest(), str(options.corpus))
    tallies = {p: PartitionTally() for p in PARTITIONS}
    counts = {"examples": 0, "scored_tokens": 0, "joint_encoding_differs": 0}
    pending: dict = {p: [] for p in PARTITIONS}
    size = options.limits.encode_chunk_documents
    limits = options.limits

    def flush(writer, part) -> None:
        records = pending[part]
        if not records:
            return
        pending[part] = []
        ids = [r.id for r in records]
        if records[0].messages is not None:  # conversations: rendered and encoded together
            values, offsets, roles = encoder.encode_many(
                [r.messages for r in records], [r.where for r in records],
                [len(r.prompt) if r.prompt is not None else 0 for r in records])
            characters = sum(len(m.get("content") or "") for r in records for m in r.messages)
        else:
            examples = [encoder.encode_prompt_completion(r.prompt, r.completion) for r in records]
            counts["joint_encoding_differs"] += sum(e.joint_differs for e in examples)
            offsets = np.zeros(len(examples) + 1, np.int64)
            np.cumsum([e.tokens.shape[0] for e in examples], out=offsets[1:])
            values = np.concatenate([e.tokens for e in examples])
            roles = np.concatenate([e.roles for e in examples])
            characters = sum(len(r.prompt) + len(r.completion) for r in records)
        counts["examples"] += len(records)
        counts["scored_tokens"] += int(roles.sum()) - int(roles[offsets[:-1]].sum())  # targets: all but the first
        writer.write_chunk(part, ids, values, offsets, roles=roles)
        tallies[part].add(chunk_tally(offsets, characters, options))

    with StagedOutputs(options, threads=1) as outputs:
        with TokenStore.writer(options.store_path, tok, row_group_size=limits.store_row_group_rows,
                               max_rows_per_file=limits.store_file_rows, roles=True, bos=False) as writer, \
                Progress(f"encoding {options.format} records", quiet=options.quiet) as bar:
            for record in _records(options):
                part = check.partition_of(record.id)
                if part is None:
                    continue
                pending[part].append(record)
                if len(pending[part]) >= size:
                    flush(writer, part)
                bar.update(1, 0)
            check.finish()
            for part in PARTITIONS:
                flush(writer, part)
            seconds = {"encode": time.perf_counter() - started}
            outputs.stage(tok, tallies, seconds=seconds, extra={"chat": dict(about, **counts)})
    return outputs.result
