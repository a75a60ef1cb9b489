"""Compare engine's ids with each file's own reference encoder on real model vocabularies.

Real tokenizer files ship inside packages on the package index, so they can be fetched without a
model hub: Llama 3 and Llama 4 (tiktoken rank files, ``llama-models``), Mistral's SentencePiece
models v1, v2, v3, v7 and its ``tekken.json`` files (``mistral-common``), cl100k_base, o200k_base
and r50k_base rank files and DeepSeek's and Anthropic's ``tokenizer.json`` (``litellm``), Whisper's
multilingual rank file (``openai-whisper``). ``--fetch`` downloads those packages (``pip download
--no-deps``), unpacks the files into DIR and makes ``tokenizer.json`` files of Llama 3, o200k and
Mistral v1 / v3 with transformers' own converters (as the Hub's were made); the comparison then encodes Tiny Shakespeare, the
script's own mixed-script samples and random strings over a hostile alphabet with engine and with
the reference (tiktoken ``encode_ordinary`` with the family's regex, ``sentencepiece``,
Hugging Face ``tokenizers`` ``encode(text, add_special_tokens=False)`` with ``encode_special_tokens``
on, since a special token's text inside a document is text; tekken: Mistral's ``Tekkenizer``
when ``mistral-common`` is installed, else its rule, tiktoken over the kept ranks shifted by the
special tokens) and prints one line per
file: texts equal, and the first difference if any. Exit status 1 when any text differs.

    python scripts/check_real_tokenizers.py --fetch /tmp/vocabularies
    python scripts/check_real_tokenizers.py /tmp/vocabularies --only llama3,tekken

Needs the test extra (tiktoken, tokenizers, sentencepiece) and, for ``--fetch``, pip and the index.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.tokenizers import load_tokenizer  # noqa: E402

GPT2 = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CL100K = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
          r"""\s*[\r\n]|\s+(?!\S)|\s""")
O200K = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
         r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
         r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

# (name, package, path inside the package archive, file name in DIR, kind, tiktoken regex)
FILES = [
    ("llama3", "llama-models", "llama_models/llama3/tokenizer.model", "llama3.tiktoken", "tiktoken", LLAMA3),
    ("llama4", "llama-models", "llama_models/llama4/tokenizer.model", "llama4.tiktoken", "tiktoken", O200K),
    ("cl100k", "litellm", "litellm/litellm_core_utils/tokenizers/9b5ad71b2ce5302211f9c61530b329a4922fc6a4",
     "cl100k_base.tiktoken", "tiktoken", CL100K),
    ("o200k", "litellm", "litellm/litellm_core_utils/tokenizers/fb374d419588a4632f3f557e76b4b70aebbca790",
     "o200k_base.tiktoken", "tiktoken", O200K),
    ("r50k", "litellm", "litellm/litellm_core_utils/tokenizers/ec7223a39ce59f226a68acc30dc1af2788490e15",
     "r50k_base.tiktoken", "tiktoken", GPT2),
    ("whisper", "openai-whisper", "whisper/assets/multilingual.tiktoken", "whisper-multilingual.tiktoken",
     "tiktoken", GPT2),
    ("deepseek", "litellm", "litellm/litellm_core_utils/tokenizers/deepseek_tokenizer.json", "deepseek.json",
     "tokenizer.json", None),
    ("anthropic", "litellm", "litellm/litellm_core_utils/tokenizers/anthropic_tokenizer.json", "anthropic.json",
     "tokenizer.json", None),
    ("mistral-v1", "mistral-common", "mistral_common/data/tokenizer.model.v1", "mistral-v1.model", "sentencepiece",
     None),
    ("mistral-v2", "mistral-common", "mistral_common/data/mistral_instruct_tokenizer_240216.model.v2",
     "mistral-v2.model", "sentencepiece", None),
    ("mistral-v3", "mistral-common", "mistral_common/data/mistral_instruct_tokenizer_240323.model.v3",
     "mistral-v3.model", "sentencepiece", None),
    ("mistral-v7", "mistral-common", "mistral_common/data/mistral_instruct_tokenizer_241114.model.v7",
     "mistral-v7.model", "sentencepiece", None),
    ("tekken", "mistral-common", "mistral_common/data/tekken_240911.json", "tekken_240911.json", "tekken", None),
    ("tekken-0718", "mistral-common", "mistral_common/data/tekken_240718.json", "tekken_240718.json", "tekken", None),
]
# tokenizer.json files that transformers makes from the files above (as the Hub's are made): (name, source
# in DIR, file in DIR, how).
CONVERTED = [
    ("llama3-hf", "llama3.tiktoken", "llama3-hf.json", "tiktoken"),
    ("o200k-hf", "o200k_base.tiktoken", "o200k-hf.json", "tiktoken"),
    ("mistral-v1-hf", "mistral-v1.model", "mistral-v1-hf.json", "sentencepiece"),
    ("mistral-v3-hf", "mistral-v3.model", "mistral-v3-hf.json", "sentencepiece"),
]
NAMES = [f[0] for f in FILES] + [c[0] for c in CONVERTED]

SAMPLES = [
    "The quick brown fox — don't YOU'LL we'Re 'S 1234567 ١٢٣ Ⅻ", "Ελληνικά κείμενα, με τόνους: άέήίόύώ ΐΰ.",
    "Русский текст: съешь же ещё этих мягких французских булок.", "日本語のテキスト、中文字符和한국어 텍스트。",
    "def f(x):\n\treturn x**2  # comment\r\n\r\n    \n", "😀👍🏽🇫🇷 e\u0301 ǅ ß ſ \u200d\u00a0\u3000 end  ",
    "a" * 3000, "日本" * 700, " " * 2000 + "x", "\n" * 50 + "  a", "", " ", "<s> </s> <|endoftext|> [INST]",
]
ALPHABET = ("aAbZ 09  \n\t\r'sllve’ʼé\u0301ß日本語한국어ελληνικάрусский🙂\u200d\u00a0\u3000.,;!?-_()[]{}<>\\/\"#$%^&*+=|~`"
            "\x00\x1f\ufeff\U0001F600ǅⅫ٣▁")


def texts() -> list[str]:
    shakespeare = (ROOT / "data" / "tinyshakespeare.txt").read_text(encoding="utf-8")
    out = [shakespeare[i:i + 5000] for i in range(0, 200_000, 5000)] + SAMPLES
    rnd = random.Random(5)
    out += ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 80))) for _ in range(300)]
    return out


def fetch(folder: Path) -> None:
    """Download each package once (no dependencies) and unpack the files FILES names into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for package in sorted({f[1] for f in FILES}):
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, package], check=True)
        archives = list(Path(tmp).iterdir())
        for name, package, inner, target, _, _ in FILES:
            stem = package.replace("-", "_")
            archive = next(a for a in archives if a.name.lower().replace("-", "_").startswith(stem))
            if archive.suffix == ".whl":
                with zipfile.ZipFile(archive) as z:
                    data = z.read(inner)
            else:
                with tarfile.open(archive) as t:
                    member = next(m for m in t.getmembers() if m.name.endswith("/" + inner))
                    data = t.extractfile(member).read()
            (folder / target).write_bytes(data)
            print(f"{name}: {package} {inner} -> {folder / target}")
    convert(folder)


def convert(folder: Path) -> None:
    """The ``CONVERTED`` tokenizer.json files, made by transformers' own converters."""
    regex = {f[3]: f[5] for f in FILES}
    for name, source, target, how in CONVERTED:
        if how == "tiktoken":
            from transformers.convert_slow_tokenizer import TikTokenConverter

            tok = TikTokenConverter(vocab_file=str(folder / source), pattern=regex[source]).converted()
            tok.save(str(folder / target))
        else:
            from transformers import LlamaTokenizerFast

            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "tokenizer.model").write_bytes((folder / source).read_bytes())
                LlamaTokenizerFast.from_pretrained(tmp).save_pretrained(Path(tmp) / "out")
                (folder / target).write_bytes((Path(tmp) / "out" / "tokenizer.json").read_bytes())
        size = len(json.loads((folder / target).read_text(encoding="utf-8"))["model"]["vocab"])
        if size < 1000:  # a converter that silently made an empty model would make every comparison vacuous
            raise SystemExit(f"{name}: transformers made a tokenizer.json of {size} tokens from {source}")
        print(f"{name}: transformers' converter, {source} -> {folder / target} ({size} tokens)")


def reference(kind: str, path: Path, regex: str | None):
    """The file's own encoder, as a function from text to ids."""
    if kind == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        enc = tiktoken.Encoding(path.stem, pat_str=regex, mergeable_ranks=load_tiktoken_bpe(str(path)),
                                special_tokens={})
        return enc.encode_ordinary
    if kind == "sentencepiece":
        import sentencepiece

        return sentencepiece.SentencePieceProcessor(model_file=str(path)).encode
    if kind == "tokenizer.json":
        from tokenizers import Tokenizer

        hf = Tokenizer.from_file(str(path))
        hf.encode_special_tokens = True  # a special token's text in a document is text, as engine encodes it
        return lambda text: hf.encode(text, add_special_tokens=False).ids
    try:  # tekken: Mistral's own Tekkenizer when mistral-common is installed
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        tekkenizer = Tekkenizer.from_file(str(path))
        return lambda text: tekkenizer.encode(text, bos=False, eos=False)
    except ImportError:
        pass
    import tiktoken  # else its rule: tiktoken over the kept ranks, shifted by the specials

    data = json.loads(path.read_text(encoding="utf-8"))
    config = data["config"]
    shift = config["default_num_special_tokens"]
    kept = data["vocab"][:config["default_vocab_size"] - shift]
    enc = tiktoken.Encoding(path.stem, pat_str=config["pattern"], special_tokens={},
                            mergeable_ranks={base64.b64decode(v["token_bytes"]): v["rank"] for v in kept})
    return lambda text: [i + shift for i in enc.encode_ordinary(text)]


def compare(path: Path, kind: str, regex: str | None, corpus: list[str]) -> tuple[int, str | None]:
    """Texts whose ids are equal, and the first difference (None when all are)."""
    tok = load_tokenizer(path, pattern=regex if kind == "tiktoken" else None)
    ref = reference(kind, path, regex)
    equal, first, empty = 0, None, 0
    for i, text in enumerate(corpus):
        got, want = tok.encode(text).tolist(), list(ref(text))
        empty += bool(text) and not want
        if got == want:
            equal += 1
        elif first is None:
            k = next((j for j in range(min(len(got), len(want))) if got[j] != want[j]), min(len(got), len(want)))
            first = f"text {i} {text[:40]!r}: at token {k} engine {got[k:k + 4]} reference {want[k:k + 4]}"
    if empty > len(corpus) // 10 and first is None:  # equal because both give nothing is no comparison
        first = f"the reference gives no ids for {empty} of the {len(corpus)} texts: is {path.name} a real vocabulary?"
    return equal, first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="folder of the files (written by --fetch)")
    parser.add_argument("--fetch", action="store_true", help="download the packages and unpack the files first")
    parser.add_argument("--only", default=None, help="comma-separated names: " + ",".join(NAMES))
    args = parser.parse_args(argv)
    if args.fetch:
        fetch(args.folder)
    wanted = None if args.only is None else set(args.only.split(","))
    corpus = texts()
    failed = False
    for name, _, _, target, kind, regex in FILES + [(c[0], None, None, c[2], "tokenizer.json", None) for c in CONVERTED]:
        if wanted is not None and name not in wanted:
            continue
        path = args.folder / target
        if not path.is_file():
            print(f"{name}: {path} missing (run with --fetch)")
            failed = True
            continue
        equal, first = compare(path, kind, regex, corpus)
        print(f"{name} ({kind}): {equal}/{len(corpus)} texts equal" + (f"; first difference {first}" if first else ""),
              flush=True)
        failed |= first is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
