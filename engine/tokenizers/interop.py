"""Import and export byte-level BPE as tiktoken rank files and Hugging Face ``tokenizer.json``.

- tiktoken: one ``<base64 bytes> <rank>`` per line; the rank is the id. Specials are not in the
  file and are passed in. Imported tokenizers keep tiktoken's rule (merge any adjacent parts
  whose concatenation is a token, lowest rank first; a piece that is a token is that token).
- tokenizer.json: a ``BPE`` model whose vocabulary is written in GPT-2's printable byte alphabet
  (``bytes_to_unicode``), merges as ``"a b"`` strings or ``["a", "b"]`` pairs (both read), a
  ``ByteLevel`` pre-tokenizer (gpt2) or ``Split(regex, Isolated) + ByteLevel(use_regex=false)`` with
  any regex the pre-tokenizer compiler takes (``engine.tokenizers.regex``; gpt2's, cl100k's and
  o200k's take their hand-written scanners). Exported tokenizers with a pattern other than gpt2
  write that ``Split`` (the regex itself) before ``ByteLevel(use_regex=false)``.
  Imported tokenizers keep the file's merge order and ids.

The import rule: ``encode(text)`` of an imported tokenizer gives exactly the ids of the file's own
reference encoder (tiktoken ``encode_ordinary``; Hugging Face ``tokenizers``
``encode(text, add_special_tokens=False)``) for every text. A component the engine does not
implement (a normalizer, a model other than BPE, ``byte_fallback``, ``add_prefix_space``...) is
refused by name, never approximated. The tokens that wrap documents are named by the caller
(``bos=`` and ``eos=`` together, or neither: then ``<|endoftext|>`` for both, or ``<bos>``/``<eos>``,
or the one special token there is); naming only one of them is an error.

- tekken (Mistral's ``tekken.json``): ``config`` (``pattern``, ``default_vocab_size``,
  ``default_num_special_tokens``), ``vocab`` (``{"rank", "token_bytes", "token_str"}`` in rank
  order) and, in newer files, ``special_tokens`` (``{"rank", "token_str", ...}``). As Mistral's own
  ``Tekkenizer`` reads it: the first ``default_num_special_tokens`` ids are the special tokens (the
  file's list, else the 20 that older files leave implicit: ``<unk>``, ``<s>``, ``</s>``, ``[INST]``
  ...), the rest filled with ``<SPECIAL_{id}>``; rank ``r`` of the vocabulary is id
  ``default_num_special_tokens + r``; only the first ``default_vocab_size -
  default_num_special_tokens`` ranks are kept; the pattern is any regex. Documents are wrapped in
  ``<s>`` / ``</s>`` unless the caller names others.

Every loader raises ``TokenizerError`` naming the file (and line for tiktoken) on bad input.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path

from engine.checks import JSONLimitError, parse_json
from engine.errors import TokenizerError
from engine.tokenizers.base import MAX_VOCAB_SIZE, check_encodable, check_file_id, check_special_ids
from engine.tokenizers.byte_bpe import ByteBpeTokenizer, bytes_to_unicode
from engine.tokenizers.pretokenize import PATTERNS, canonical_pattern
from engine.tokenizers.regex import reads_alike

__all__ = ["load_tiktoken", "save_tiktoken", "load_hf_tokenizer_json", "save_hf_tokenizer_json", "merges_from_ranks"]

ENDOFTEXT = "<|endoftext|>"


def _from_byte_level_table() -> dict[int, str]:
    """``str.translate`` table from a byte-level token's characters to ``chr(byte)``, so that
    ``.encode("latin-1")`` gives its bytes; every other character below 256 becomes a lone surrogate,
    which (as any character above 255 left as it is) fails the encode: outside the alphabet."""
    table = {ord(c): chr(b) for b, c in bytes_to_unicode().items()}
    for code in range(256):
        table.setdefault(code, "\udfff")
    return table


_FROM_BYTE_LEVEL = _from_byte_level_table()


def _choose_wrappers(specials: dict[str, int], bos: str | None, eos: str | None, source: str) -> tuple[str, str]:
    """The special tokens that wrap documents: given names, else a conventional default."""
    if bos is None and eos is None:
        if ENDOFTEXT in specials:
            bos = eos = ENDOFTEXT
        elif "<bos>" in specials and "<eos>" in specials:
            bos, eos = "<bos>", "<eos>"
        elif len(specials) == 1:
            bos = eos = next(iter(specials))
        else:
            raise TokenizerError(
                f"{source}: cannot tell which special tokens wrap documents among {sorted(specials)}; "
                "pass bos= and eos= (CLI: --bos/--eos)")
    elif bos is None or eos is None:  # one name alone would silently wrap with the same token on both sides
        given, missing = ("bos", "eos") if eos is None else ("eos", "bos")
        value = bos if eos is None else eos
        raise TokenizerError(
            f"{source}: {given} token {value!r} given without {missing}: name both (CLI: --bos and --eos; "
            f"the same token twice, e.g. --bos {value!r} --eos {value!r}, wraps documents GPT-2 style)")
    for name, value in (("bos", bos), ("eos", eos)):
        if value not in specials:
            raise TokenizerError(f"{source}: {name} token {value!r} is not a special token (specials: {sorted(specials)})")
    return bos, eos


def load_tiktoken(path: str | os.PathLike, *, pattern: str = "gpt2", special_tokens: dict[str, int] | None = None,
                  bos: str | None = None, eos: str | None = None) -> ByteBpeTokenizer:
    """Read a tiktoken rank file. Without specials, ``<|endoftext|>`` is added after the last rank."""
    path = Path(path)
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read tiktoken file: {exc.strerror}") from None
    ranks: dict[int, bytes] = {}
    seen: dict[bytes, int] = {}
    reserved: set[int] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = [f.decode("utf-8", "replace") for f in line.split()]
        if len(fields) != 2:
            got = line[:60].decode("utf-8", "replace")
            raise TokenizerError(f"{path}:{number}: expected '<base64 token> <rank>', got {got!r}")
        try:  # "=" is the empty token (Whisper's files reserve a rank that way): see below
            token = b"" if fields[0] == "=" else base64.b64decode(fields[0].encode("ascii", "replace"), validate=True)
        except (binascii.Error, ValueError):
            raise TokenizerError(f"{path}:{number}: {fields[0][:40]!r} is not valid base64") from None
        try:
            rank = int(fields[1])
        except ValueError:
            raise TokenizerError(f"{path}:{number}: rank {fields[1][:20]!r} is not an integer") from None
        if rank < 0 or rank >= MAX_VOCAB_SIZE:
            raise TokenizerError(f"{path}:{number}: rank {rank} is outside 0..{MAX_VOCAB_SIZE - 1} "
                                 f"(ids are uint32 and a vocabulary holds at most {MAX_VOCAB_SIZE} ids)")
        if rank in ranks or rank in reserved:
            raise TokenizerError(f"{path}:{number}: rank {rank} appears twice")
        if not token:  # a reserved rank: no text encodes to it and it decodes to nothing, as in tiktoken
            reserved.add(rank)
            continue
        if token in seen:
            raise TokenizerError(f"{path}:{number}: token {token!r} appears twice (first with rank {seen[token]})")
        ranks[rank] = token
        seen[token] = rank
    if not ranks:
        raise TokenizerError(f"{path}: no ranks found (expected lines '<base64 token> <rank>')")
    size = max(max(ranks), max(reserved, default=-1)) + 1
    try:
        specials = check_special_ids(dict(special_tokens) if special_tokens else {ENDOFTEXT: size})
    except TokenizerError as exc:
        raise TokenizerError(f"{path}: {exc}") from None
    for name, i in specials.items():
        if i in ranks or i in reserved:
            what = "a reserved (empty) rank" if i in reserved else f"the rank of {ranks[i]!r}"
            raise TokenizerError(f"{path}: special token {name!r} id {i} is already {what}")
    bos, eos = _choose_wrappers(specials, bos, eos, str(path))
    tokens = [ranks.get(i) for i in range(size)]
    try:
        tokenizer = ByteBpeTokenizer(tokens, merges=None, specials=specials, pattern=pattern, bos=bos, eos=eos)
    except TokenizerError as exc:  # the vocabulary itself (a missing single byte, ...): name the file
        raise TokenizerError(f"{path}: {exc}") from None
    tokenizer.notes = (() if special_tokens else (_added_endoftext(size),)) + (
        (_reserved_ranks(reserved),) if reserved else ())
    return tokenizer


def _reserved_ranks(reserved: set[int]) -> str:
    shown = ", ".join(str(i) for i in sorted(reserved)[:5]) + (", ..." if len(reserved) > 5 else "")
    return f"{len(reserved)} empty rank(s) kept as reserved ids that no text encodes to ({shown})"


def _added_endoftext(token_id: int) -> str:
    return f"the file names no special tokens: {ENDOFTEXT} added as id {token_id}, wrapping every document"


def save_tiktoken(tokenizer: ByteBpeTokenizer, path: str | os.PathLike) -> Path:
    """Write the byte tokens as ``<base64> <id>`` lines (specials are not part of the format); an id
    of the vocabulary that is neither a token nor a special (a reserved rank) is written ``= <id>``,
    the empty token, so every rank keeps its place when the file is read back."""
    path = Path(path)
    specials = set(tokenizer.specials.values())
    lines = [f"{base64.b64encode(t).decode('ascii')} {i}\n" if t is not None else f"= {i}\n"
             for i, t in enumerate(tokenizer.tokens) if t is not None or i not in specials]
    path.write_text("".join(lines), encoding="ascii")
    return path


def merges_from_ranks(tokens: list[bytes | None]) -> list[tuple[int, int]]:
    """GPT-2-style merges of a rank vocabulary: each token split by BPE over lower ranks, in rank order."""
    rank = {t: i for i, t in enumerate(tokens) if t is not None}
    merges = []
    for i, token in enumerate(tokens):
        if token is None or len(token) < 2:
            continue
        parts = [token[j:j + 1] for j in range(len(token))]
        while len(parts) > 2:
            best, best_rank = -1, i
            for j in range(len(parts) - 1):
                r = rank.get(parts[j] + parts[j + 1], i)
                if r < best_rank:
                    best, best_rank = j, r
            if best < 0:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        if len(parts) == 2 and parts[0] in rank and parts[1] in rank:
            merges.append((rank[parts[0]], rank[parts[1]]))
    return merges


def _pattern_of(pre_tokenizer, source: str) -> str:
    kind = pre_tokenizer.get("type") if isinstance(pre_tokenizer, dict) else None
    if kind == "ByteLevel":
        if pre_tokenizer.get("add_prefix_space"):
            raise TokenizerError(f"{source}: ByteLevel with add_prefix_space=true is not supported (expected false)")
        if pre_tokenizer.get("use_regex", True):
            return "gpt2"
    if kind == "Sequence":
        steps = pre_tokenizer.get("pretokenizers")
        if isinstance(steps, list) and len(steps) == 2 and all(isinstance(step, dict) for step in steps) \
                and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel" \
                and not steps[1].get("use_regex", True) and not steps[1].get("add_prefix_space"):
            pattern = steps[0].get("pattern")
            regex = pattern.get("Regex") if isinstance(pattern, dict) else None
            if isinstance(regex, str) and steps[0].get("behavior") == "Isolated" and not steps[0].get("invert"):
                pattern = canonical_pattern(regex, f"{source}: pre_tokenizer Split regex")
                if not _oniguruma_reads_alike(pattern):  # then the pipeline reads it, as Oniguruma does
                    raise TokenizerError(f"{source}: pre_tokenizer Split regex {regex!r} uses \\w, \\b, ^ or $, "
                                         "which Oniguruma reads otherwise than tiktoken")
                return pattern
    raise TokenizerError(
        f"{source}: unsupported pre_tokenizer {json.dumps(pre_tokenizer)[:200]}; expected ByteLevel(use_regex=true) "
        "or Sequence[Split(Regex, Isolated, invert=false), ByteLevel(use_regex=false)]")


def _oniguruma_reads_alike(pattern: str) -> bool:
    """True when Hugging Face's Oniguruma reads a byte-level pattern as engine does (a named one
    always; a regex unless ``regex.reads_alike`` says otherwise)."""
    return pattern in PATTERNS or reads_alike(pattern)


def _json_file(path: Path, what: str):
    """The parsed JSON of ``path`` (``engine.checks.parse_json``'s limits), or a TokenizerError naming it."""
    try:
        return parse_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read {what}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokenizerError(f"{path}: not valid JSON ({exc})") from None
    except JSONLimitError as exc:
        raise TokenizerError(f"{path}: JSON past engine's limits: {exc}") from None


def load_hf_tokenizer_json(path: str | os.PathLike, *, bos: str | None = None, eos: str | None = None,
                           data: object = None) -> ByteBpeTokenizer:
    """Read a Hugging Face ``tokenizer.json`` with a byte-level BPE model (``data``: the file already
    parsed by the caller, which is then not read again; ``path`` names it in messages)."""
    path = Path(path)
    source = str(path)
    data = _json_file(path, "tokenizer.json") if data is None else data
    if not isinstance(data, dict):
        raise TokenizerError(f"{source}: expected a JSON object with a \"model\", got {type(data).__name__}")
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE":
        raise TokenizerError(f"{source}: expected a \"model\" of type \"BPE\"")
    for option in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise TokenizerError(f"{source}: BPE option {option}={model[option]!r} is not supported (expected null)")
    if model.get("byte_fallback"):
        raise TokenizerError(f"{source}: byte_fallback BPE is not byte-level BPE (expected false)")
    if data.get("normalizer"):
        raise TokenizerError(f"{source}: normalizer {json.dumps(data['normalizer'])[:200]} is not supported (expected null)")
    pattern = _pattern_of(data.get("pre_tokenizer"), source)
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        raise TokenizerError(f"{source}: model needs a \"vocab\" object and a \"merges\" list")
    if not vocab:
        raise TokenizerError(f"{source}: the model's \"vocab\" is empty (expected the 256 byte tokens at least)")
    try:
        ids = _vocab_ids(vocab)
        specials = _added_tokens(data.get("added_tokens"))
    except TokenizerError as exc:
        raise TokenizerError(f"{source}: {exc}") from None
    size = max(max(ids), max(specials.values(), default=-1)) + 1
    tokens: list[bytes | None] = [None] * size
    for text, i in vocab.items():
        if specials.get(text) == i:
            continue
        try:
            tokens[i] = text.translate(_FROM_BYTE_LEVEL).encode("latin-1")
        except UnicodeEncodeError:
            to_byte = {c: b for b, c in bytes_to_unicode().items()}
            bad = next(c for c in text if c not in to_byte)
            raise TokenizerError(f"{source}: vocab token {text!r} (id {i}) has character {bad!r} outside the "
                                 "byte-level alphabet (expected a ByteLevel vocabulary)") from None
    pairs = []
    for k, merge in enumerate(merges):
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if isinstance(parts, list) and len(parts) == 2:
            left, right = parts
            if isinstance(left, str) and isinstance(right, str):
                a, b = vocab.get(left), vocab.get(right)
                if a is not None and b is not None:
                    pairs.append((a, b))
                    continue
        raise TokenizerError(f"{source}: merge {k} {merge!r}: expected two vocabulary tokens")
    notes: tuple[str, ...] = ()
    if not specials:  # like a tiktoken rank file: documents need a wrapping token
        specials = {ENDOFTEXT: size}
        notes = (_added_endoftext(size),)
    bos, eos = _choose_wrappers(specials, bos, eos, source)
    try:
        tokenizer = ByteBpeTokenizer(tokens, merges=pairs, specials=specials, pattern=pattern, bos=bos, eos=eos,
                                     whole_piece_first=bool(model.get("ignore_merges")))
    except TokenizerError as exc:
        raise TokenizerError(f"{source}: {exc}") from None
    tokenizer.notes = notes
    return tokenizer


def _vocab_ids(vocab: dict) -> dict[int, str]:
    """``{id: token}`` of a tokenizer.json vocabulary: every id checked, no id twice."""
    owner: dict[int, str] = {}
    for text, value in vocab.items():
        i = check_file_id(value, f"vocab token {text!r:.40}")
        if i in owner:
            raise TokenizerError(f"vocab tokens {owner[i]!r:.40} and {text!r:.40} share id {i} (expected distinct ids)")
        owner[i] = text
    return owner


def _added_tokens(added_tokens) -> dict[str, int]:
    """``{content: id}`` of the ``added_tokens`` list: objects with a string content and a checked id."""
    if added_tokens is None:
        return {}
    if not isinstance(added_tokens, list):
        raise TokenizerError(f"\"added_tokens\" is {type(added_tokens).__name__}, expected a list of objects")
    specials: dict[str, int] = {}
    for k, added in enumerate(added_tokens):
        if not (isinstance(added, dict) and "id" in added and isinstance(added.get("content"), str) and added["content"]):
            raise TokenizerError(f"added token {k}: expected an object with a string \"content\" and an integer \"id\", "
                                 f"got {json.dumps(added)[:80]}")
        check_encodable([added["content"]], f"added token {k}")  # "\ud800" ended in UnicodeEncodeError (exit 1)
        if added["content"] in specials:
            raise TokenizerError(f"added token {added['content']!r:.40} appears twice (expected distinct contents)")
        specials[added["content"]] = added["id"]
    return check_special_ids(specials, "added token")


def save_hf_tokenizer_json(tokenizer: ByteBpeTokenizer, path: str | os.PathLike) -> Path:
    """Write a ``tokenizer.json`` that Hugging Face ``tokenizers`` loads and encodes identically."""
    path = Path(path)
    table = bytes_to_unicode()
    text = ["".join(table[b] for b in t) if t is not None else None for t in tokenizer.tokens]
    merges = tokenizer.merges if tokenizer.merges is not None else merges_from_ranks(tokenizer.tokens)
    if not _oniguruma_reads_alike(tokenizer.pattern):
        raise TokenizerError(f"pattern {tokenizer.pattern!r} uses \\w, \\b, ^ or $, which Hugging Face's Oniguruma "
                             "reads otherwise than this tokenizer (\\w on U+00B2, U+00B3, U+00B9, U+00BC..U+00BE, "
                             "U+200C, U+200D; ^ and $ at every line): its tokenizer.json would not encode identically")
    if tokenizer.pattern == "gpt2":
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    else:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": PATTERNS.get(tokenizer.pattern, tokenizer.pattern)},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    data = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": name, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for name, i in sorted(tokenizer.specials.items(), key=lambda kv: kv[1])],
        "normalizer": None,
        "pre_tokenizer": pre,
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "ignore_merges": tokenizer.whole_piece_first,
            "vocab": {t: i for i, t in enumerate(text) if t is not None} | {n: i for n, i in tokenizer.specials.items()},
            "merges": [[text[a], text[b]] for a, b in merges],
        },
    }
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


# The special tokens of a tekken file that lists none (Mistral's files of version v7 and before).
TEKKEN_IMPLICIT_SPECIALS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)


def looks_like_tekken(data: object) -> bool:
    """True for a parsed JSON object shaped as a tekken file (``config`` with a pattern, ``vocab`` a list)."""
    return (isinstance(data, dict) and isinstance(data.get("config"), dict) and "pattern" in data["config"]
            and isinstance(data.get("vocab"), list) and "model" not in data and "format" not in data)


def load_tekken(path: str | os.PathLike, *, bos: str | None = None, eos: str | None = None,
                data: object = None) -> ByteBpeTokenizer:
    """Read Mistral's ``tekken.json`` (the rules are in this module's docstring); ``data``: the file
    already parsed by the caller. Ids equal ``Tekkenizer.encode(text, bos=False, eos=False)``."""
    path = Path(path)
    source = str(path)
    data = _json_file(path, "tekken file") if data is None else data
    if not looks_like_tekken(data):
        raise TokenizerError(f"{source}: expected a tekken file (an object with \"config\" naming a \"pattern\" "
                             "and a \"vocab\" list)")
    config = data["config"]
    pattern = config["pattern"]
    if not isinstance(pattern, str):
        raise TokenizerError(f"{source}: config.pattern is {type(pattern).__name__}, expected a regex string")
    pattern = canonical_pattern(pattern, f"{source}: config.pattern")
    vocab_size = check_file_id(config.get("default_vocab_size"), f"{source}: config.default_vocab_size")
    n_special = check_file_id(config.get("default_num_special_tokens"), f"{source}: config.default_num_special_tokens")
    vocab = data["vocab"]
    if not n_special <= vocab_size <= len(vocab) + n_special:
        raise TokenizerError(f"{source}: config.default_vocab_size {vocab_size} must lie between "
                             f"default_num_special_tokens ({n_special}) and that plus the {len(vocab)} vocab entries")
    tokens: list[bytes | None] = [None] * vocab_size
    for rank, entry in enumerate(vocab[:vocab_size - n_special]):
        where = f"{source}: vocab[{rank}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("token_bytes"), str):
            raise TokenizerError(f"{where}: expected an object with a base64 \"token_bytes\" string")
        if check_file_id(entry.get("rank"), f"{where}.rank") != rank:
            raise TokenizerError(f"{where}: rank {entry['rank']} is out of order (expected {rank})")
        try:
            token = base64.b64decode(entry["token_bytes"].encode("ascii", "replace"), validate=True)
        except (binascii.Error, ValueError):
            raise TokenizerError(f"{where}: token_bytes {entry['token_bytes'][:40]!r} is not valid base64") from None
        if not token:
            raise TokenizerError(f"{where}: token_bytes is empty (expected at least one byte)")
        tokens[n_special + rank] = token
    listed = data.get("special_tokens")
    if listed is None:
        if n_special < len(TEKKEN_IMPLICIT_SPECIALS):  # Mistral's Tekkenizer refuses it too
            raise TokenizerError(f"{source}: the file lists no special_tokens, and the {len(TEKKEN_IMPLICIT_SPECIALS)} "
                                 f"implicit ones do not fit in config.default_num_special_tokens ({n_special})")
        names = list(TEKKEN_IMPLICIT_SPECIALS)
    else:
        if not isinstance(listed, list):
            raise TokenizerError(f"{source}: special_tokens is {type(listed).__name__}, expected a list")
        names = []
        for k, entry in enumerate(listed):
            where = f"{source}: special_tokens[{k}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("token_str"), str):
                raise TokenizerError(f"{where}: expected an object with a \"token_str\" string")
            if check_file_id(entry.get("rank"), f"{where}.rank") != k:
                raise TokenizerError(f"{where}: rank {entry['rank']} is out of order (expected {k})")
            names.append(entry["token_str"])
    if len(names) > n_special:
        raise TokenizerError(f"{source}: {len(names)} special tokens listed, more than "
                             f"config.default_num_special_tokens ({n_special})")
    names += [f"<SPECIAL_{i}>" for i in range(len(names), n_special)]
    specials: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in specials:
            raise TokenizerError(f"{source}: special token {name!r} appears twice (ids {specials[name]} and {i})")
        specials[name] = i
    if bos is None and eos is None:
        bos, eos = "<s>", "</s>"
    bos, eos = _choose_wrappers(specials, bos, eos, source)
    try:
        return ByteBpeTokenizer(tokens, merges=None, specials=specials, pattern=pattern, bos=bos, eos=eos)
    except TokenizerError as exc:
        raise TokenizerError(f"{source}: {exc}") from None
