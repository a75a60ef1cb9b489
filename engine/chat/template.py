"""Chat templates: Jinja2 rendered in a sandbox, exactly as Hugging Face transformers renders them.

The environment is ``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` with the
``loopcontrols`` extension and a ``{% generation %}...{% endgeneration %}`` block that records the
character span of what it renders; ``raise_exception(message)`` (a ``TemplateError``), the ``tojson``
filter (``json.dumps`` without HTML escaping, ``ensure_ascii=False``), ``strftime_now(format)``, a
``dict`` callable and an attribute-safe ``namespace`` are globals, and the template sees
``messages``, ``tools=None``, ``documents=None``, ``add_generation_prompt=False`` and the
tokenizer's special-token strings (``bos_token``, ``eos_token``, ``unk_token``, ``pad_token``...), as
``apply_chat_template`` passes them. Messages' keys whose value is None are dropped first, as
transformers does.

``ChatTemplate.render(messages)`` returns the text and the generation spans;
``content_spans(messages)`` finds where each assistant message's content lies in the rendering by
rendering once more with each assistant content replaced by a unique private-use sentinel: the
sentinels' places are the spans, and putting the contents back must give the rendering itself
(else the template changed the content, e.g. split or re-cased it, and the spans are unknown: an
error, never a guess). A template that trims the content (``| trim``) is followed when the trimmed
content is what it renders.

Templates come from a ``.jinja`` file or a ``tokenizer_config.json`` (its ``chat_template``: a
string, or a list of ``{"name", "template"}`` whose ``default`` is taken), or from a model folder
holding ``tokenizer_config.json`` (or ``chat_template.jinja``).
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from engine.checks import parse_json
from engine.errors import ConfigurationError, CorpusError

__all__ = ["ChatTemplate", "ChatTemplateError", "load_chat_template", "read_tokenizer_config", "SENTINEL"]

_GENERATION = re.compile(r"\{\%-?\s*generation\s*-?\%\}")
SENTINEL = "\ue000"  # private-use characters around a sentinel's number: never in a real template's output
_SENTINEL_END = "\ue001"
_SENTINEL_RE = re.compile(f"{SENTINEL}([0-9]+){_SENTINEL_END}")


class ChatTemplateError(CorpusError):
    """A template that cannot render a conversation (it raised, or renders what cannot be flagged)."""


def _environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTracker(jinja2.ext.Extension):
        """``{% generation %}``: records (start, end) character spans of what it renders."""

        tags = {"generation"}

        def __init__(self, environment):
            super().__init__(environment)
            environment.extend(track_generation=self.track)
            self._tracking = ContextVar("generation_tracker", default=None)

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_generation"), [], [], body).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation(self, context, caller):
            rendered = caller()
            tracking = self._tracking.get()
            if tracking is not None:
                blocks, spans = tracking
                start = sum(len(b) for b in blocks)
                spans.append((start, start + len(rendered)))
            return rendered

        @contextmanager
        def track(self, blocks: list, spans: list):
            token = self._tracking.set((blocks, spans))
            try:
                yield
            finally:
                self._tracking.reset(token)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    class TemplateDict:
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"a chat template cannot store the attribute {name!r} on a namespace")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


@dataclass
class ChatTemplate:
    """A compiled chat template and the special-token strings it is rendered with."""

    source: str
    name: str = "<template>"
    special_tokens: dict | None = None  # {"bos_token": "<s>", "eos_token": "</s>", ...}

    def __post_init__(self) -> None:
        import jinja2

        if not isinstance(self.source, str) or not self.source:
            raise ConfigurationError(f"{self.name}: the chat template is empty; expected Jinja2 text")
        try:
            self._compiled = _environment().from_string(self.source)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigurationError(f"{self.name}: chat template line {exc.lineno}: {exc.message}") from None
        self.has_generation = bool(_GENERATION.search(self.source))
        self._variables = {k: v for k, v in (self.special_tokens or {}).items() if v is not None}

    def _render(self, messages: list[dict], where: str, spans: list | None = None) -> str:
        import jinja2

        arguments = dict(self._variables, messages=messages, tools=None, documents=None, add_generation_prompt=False)
        try:
            if spans is None:
                return self._compiled.render(**arguments)
            blocks: list[str] = []
            with self._compiled.environment.track_generation(blocks, spans):
                for block in self._compiled.generate(**arguments):
                    blocks.append(block)
            return "".join(blocks)
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"{where}: the chat template {self.name} raised: {exc}") from None
        except Exception as exc:  # a template is code: any failure in it is this conversation's
            raise ChatTemplateError(f"{where}: the chat template {self.name} failed ({type(exc).__name__}: {exc})") from None

    def render(self, messages: list[dict], where: str = "conversation") -> tuple[str, list[tuple[int, int]]]:
        """(rendered text, ``{% generation %}`` spans in characters, in order)."""
        spans: list[tuple[int, int]] = []
        text = self._render(_plain(messages), where, spans if self.has_generation else None)
        return text, spans

    def content_spans(self, messages: list[dict], text: str, where: str = "conversation"
                      ) -> list[tuple[int, tuple[int, int]]]:
        """``(message index, character span)`` of each assistant message's content in ``text`` (the
        rendering of ``messages``), in order; an assistant message without content (only
        ``tool_calls``) has none."""
        messages = _plain(messages)
        assistant = [i for i, m in enumerate(messages)
                     if m.get("role") == "assistant" and isinstance(m.get("content"), str)]
        marked = [dict(m) for m in messages]
        for n, i in enumerate(assistant):
            marked[i]["content"] = f"{SENTINEL}{n}{_SENTINEL_END}"
        shown = self._render(marked, where)
        pieces, spans, at, out_len = [], [], 0, 0
        for match in _SENTINEL_RE.finditer(shown):
            n = int(match.group(1))
            if n >= len(assistant) or len(spans) != n:
                raise ChatTemplateError(f"{where}: the chat template {self.name} renders assistant contents out of "
                                        "order or more than once; their tokens cannot be flagged")
            content = messages[assistant[n]]["content"]
            pieces.append(shown[at:match.start()])
            out_len += match.start() - at
            spans.append((out_len, content))
            at = match.end()
        pieces.append(shown[at:])
        if len(spans) != len(assistant):
            raise ChatTemplateError(f"{where}: the chat template {self.name} renders {len(spans)} of "
                                    f"{len(assistant)} assistant message(s); the others' tokens cannot be flagged")
        for variant in (lambda c: c, str.strip):
            rebuilt, result, length = [], [], 0
            for k, piece in enumerate(pieces):
                rebuilt.append(piece)
                length += len(piece)
                if k < len(spans):
                    content = variant(spans[k][1])
                    result.append((length, length + len(content)))
                    rebuilt.append(content)
                    length += len(content)
            if "".join(rebuilt) == text:
                return list(zip(assistant, result))
        raise ChatTemplateError(
            f"{where}: the chat template {self.name} changes an assistant message's content as it renders it "
            "(the rendering differs from the template's text with the contents put back); the assistant tokens "
            "cannot be found, so the template needs {% generation %} markers")


def _plain(messages: list[dict]) -> list[dict]:
    """Messages as the template sees them: keys whose value is None dropped (as transformers does)."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


def read_tokenizer_config(path: Path) -> dict:
    try:
        data = parse_json(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path}: expected a JSON object (tokenizer_config.json)")
    return data


def _token_string(value) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, an AddedToken dict, or null."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def special_token_strings(config: dict) -> dict:
    """``{"bos_token": ..., "eos_token": ...}`` and the other named special tokens of a tokenizer_config.json."""
    names = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
    out = {name: _token_string(config.get(name)) for name in names if name in config}
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        out["additional_special_tokens"] = [t for t in (_token_string(v) for v in extra) if t is not None]
    return out


def load_chat_template(path: str | Path, special_tokens: dict | None = None) -> ChatTemplate:
    """A ``.jinja`` file, a ``tokenizer_config.json``, or a model folder holding one of them.

    ``special_tokens``: the strings the template sees (``bos_token``...); default the ones of the
    tokenizer_config.json (the given one, or the folder's / the .jinja file's sibling)."""
    path = Path(path)
    if path.is_dir():
        for name in ("chat_template.jinja", "tokenizer_config.json"):
            if (path / name).is_file() and (name.endswith(".jinja") or "chat_template" in read_tokenizer_config(path / name)):
                return load_chat_template(path / name, special_tokens)
        raise ConfigurationError(f"{path}: no chat template here (expected chat_template.jinja or a "
                                 "tokenizer_config.json with a \"chat_template\"); pass --chat-template FILE")
    if not path.is_file():
        raise ConfigurationError(f"--chat-template {path}: file not found (expected FILE.jinja or tokenizer_config.json)")
    config_file = path if path.suffix == ".json" else path.with_name("tokenizer_config.json")
    config = read_tokenizer_config(config_file) if config_file.is_file() else {}
    if special_tokens is None:
        special_tokens = special_token_strings(config)
    if path.suffix == ".json":
        source = config.get("chat_template")
        if isinstance(source, list):
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
        if not isinstance(source, str):
            raise ConfigurationError(f"{path}: no \"chat_template\" string (or list with a \"default\" entry)")
    else:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"{path}: cannot read the chat template ({exc})") from None
    return ChatTemplate(source, name=str(path), special_tokens=special_tokens)
