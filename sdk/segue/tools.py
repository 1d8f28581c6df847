"""`@tool`: a Python function the model may call, and `ToolSource`: tools that come from outside the app.

The JSON-schema parameters come from the signature (types) and the docstring (descriptions, Google style
"Args:" section). Arguments are validated against that schema before the call; an unknown tool, invalid
arguments, an exception, a timeout or a result that is not JSON become an error result the model sees, never a
crash of the run. A tool may return a `ToolOutput` to report a failure itself or to show the model images.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, overload

import attrs
from jsonschema import Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from segue._core.json_types import json_schema_for
from segue.generated import ImageBlock, ToolDefinition, ToolResultBlock

#: Results longer than this many characters are cut, with a marker saying so (Tool(max_result_chars=...)).
DEFAULT_MAX_RESULT_CHARS = 100_000
TRUNCATION_MARKER = "\n…[segue: result truncated from {total} to {kept} characters]"
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@attrs.frozen(kw_only=True)
class ToolOutput:
    """What a tool may return instead of a plain value: the text the model sees, whether it reports a failure
    (`is_error`), and images, which the model sees right after the tool results."""

    content: str
    is_error: bool = False
    images: tuple[ImageBlock, ...] = ()


@attrs.frozen(kw_only=True)
class ToolOutcome:
    """What one call produced: the result block the model sees (plus its images), and what the store records."""

    result: ToolResultBlock
    duration_ms: float
    images: tuple[ImageBlock, ...] = ()


class ToolSource:
    """Tools that come from outside the app, such as an MCP server (`segue.mcp.MCPTools`).

    An agent reads a source's tools once per run, before anything of the run is written, and keeps them for the
    whole run; a source that cannot list its tools raises there, naming itself. `aclose()` releases what the source
    holds (a server process, a connection); an agent's `aclose()` closes its sources.
    """

    #: Names the source in errors, logs and traces.
    name: str

    async def tools(self) -> list[Tool]:
        """The tools for one run, in the order they are offered."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release what the source holds; it starts again lazily when it is used next."""


@attrs.frozen(kw_only=True)
class Tool:
    """A callable tool. Build it with `@tool`; `definition` is what the model is offered."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any] = attrs.field(repr=False)
    requires_approval: bool = False
    timeout: float | None = 60.0
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    strict: bool | None = None
    #: The ToolSource the tool came from (its name), e.g. an MCP server; None for the app's own tools.
    source: str | None = None
    _validator: Validator = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {_NAME.pattern} (letters, digits, _ and -)")
        # A schema that names its dialect ($schema, e.g. draft-07 from an MCP server) is read in that dialect.
        dialect = validator_for(self.parameters, default=Draft202012Validator)
        dialect.check_schema(self.parameters)
        object.__setattr__(self, "_validator", dialect(self.parameters))

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters, strict=self.strict
        )

    def argument_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        return [
            f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}"
            for e in sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        ]

    async def invoke(self, call_id: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Validate, call (sync functions in a worker thread), and turn the outcome into a result block."""
        started = time.perf_counter()

        def outcome(content: str, is_error: bool, images: tuple[ImageBlock, ...] = ()) -> ToolOutcome:
            return ToolOutcome(
                result=ToolResultBlock(tool_call_id=call_id, content=content, is_error=True if is_error else None),
                duration_ms=(time.perf_counter() - started) * 1000,
                images=images,
            )

        errors = self.argument_errors(arguments)
        if errors:
            return outcome(f"invalid arguments for {self.name}: " + "; ".join(errors), True)
        try:
            value = await asyncio.wait_for(self._call(dict(arguments)), timeout=self.timeout)
        except TimeoutError:
            return outcome(f"tool {self.name} did not finish within {self.timeout:g} s and was abandoned", True)
        except Exception as e:
            return outcome(f"tool {self.name} raised {type(e).__name__}: {e}", True)
        if isinstance(value, ToolOutput):
            return outcome(_clean(_truncate(value.content, self.max_result_chars)), value.is_error, value.images)
        try:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            return outcome(
                f"tool {self.name} returned a {type(value).__name__}, which is not JSON ({e}); "
                "return str, numbers, booleans, None, lists or dicts",
                True,
            )
        return outcome(_clean(_truncate(text, self.max_result_chars)), False)

    async def _call(self, arguments: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**arguments)
        return await asyncio.to_thread(self.fn, **arguments)


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = TRUNCATION_MARKER.format(total=len(text), kept=limit)
    return text[:limit] + marker


def _clean(text: str) -> str:
    """Lone UTF-16 surrogates cannot be encoded as UTF-8 (JSON on the wire, the store): replace them."""
    return text.encode("utf-8", errors="replace").decode("utf-8") if _has_surrogate(text) else text


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = 60.0,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    strict: bool | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    timeout: float | None = 60.0,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    strict: bool | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool: `@tool` or `@tool(requires_approval=True, timeout=10)`."""

    def build(f: Callable[..., Any]) -> Tool:
        summary, arg_docs = _parse_docstring(inspect.getdoc(f) or "")
        return Tool(
            name=name or f.__name__,
            description=description or summary or f.__name__.replace("_", " "),
            parameters=parameters_schema(f, arg_docs),
            fn=f,
            requires_approval=requires_approval,
            timeout=timeout,
            max_result_chars=max_result_chars,
            strict=strict,
        )

    return build(fn) if fn is not None else build


def as_tools(
    items: Sequence[Tool | ToolSource | Callable[..., Any] | Callable[..., Awaitable[Any]]],
) -> list[Tool | ToolSource]:
    """Accept tools, tool sources or plain functions (decorated on the fly); refuse duplicate names among the
    tools (a source's tools are checked when a run reads them)."""
    result = [item if isinstance(item, Tool | ToolSource) else tool(item) for item in items]
    seen: set[str] = set()
    for t in result:
        if isinstance(t, ToolSource):
            continue
        if t.name in seen:
            raise ValueError(f"two tools are named {t.name!r}; tool names must be unique")
        seen.add(t.name)
    return result


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and `name: description` lines of an Args:/Arguments:/Parameters: section."""
    paragraphs = doc.split("\n\n")
    summary = " ".join(paragraphs[0].split()) if paragraphs and not _is_section(paragraphs[0]) else ""
    args: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        if _is_section(stripped):
            in_args = stripped.rstrip(":").lower() in ("args", "arguments", "parameters")
            current = None
            continue
        if not in_args or not stripped:
            continue
        match = re.match(r"^(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", stripped)
        if match and line.startswith((" ", "\t")) and len(line) - len(line.lstrip()) <= 4:
            current = match.group(1)
            args[current] = match.group(3)
        elif current:
            args[current] = f"{args[current]} {stripped}".strip()
    return summary, args


def _is_section(text: str) -> bool:
    return bool(re.match(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$", text.strip()))


def parameters_schema(fn: Callable[..., Any], descriptions: Mapping[str, str] | None = None) -> dict[str, Any]:
    """JSON Schema of a function's keyword arguments."""
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__}: *args / **kwargs cannot be described to a model; name each argument")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"tool {fn.__name__}: argument {param.name!r} is positional-only; models pass keywords")
        annotation = hints.get(param.name, Any)
        schema = json_schema_for(annotation, f"tool argument {fn.__name__}({param.name})")
        if descriptions and param.name in descriptions:
            schema["description"] = descriptions[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif param.default is None or isinstance(param.default, str | int | float | bool):
            schema["default"] = param.default
        properties[param.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return out
