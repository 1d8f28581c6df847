"""`@tool`: a Python function the model may call, and `ToolSource`: tools that come from outside the app.

The JSON-schema parameters come from the signature (types) and the docstring (descriptions, Google style
"Args:" section). Arguments are validated against that schema before the call; an unknown tool, invalid
arguments, an exception, a timeout or a result that is not JSON become an error result the model sees, never a
crash of the run. A tool may return a `ToolOutput` to report a failure itself or to show the model images.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import re
import time
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, overload

import attrs
from jsonschema.protocols import Validator

from segue._core.hashing import compact_json
from segue._core.json_schema import errors_of, local_validator
from segue._core.json_types import from_json, json_schema_for, to_json
from segue._core.schema_work import validating
from segue.generated import ImageBlock, ToolDefinition, ToolResultBlock
from segue.tool_context import RunContext, is_run_context

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
    #: Safe to call again with the same arguments (idempotent, or read-only): a recovered run re-runs such a call
    #: when its process died during it; any other interrupted call is not repeated (docs/durability.md).
    retry_safe: bool = False
    #: The ToolSource the tool came from (its name), e.g. an MCP server; None for the app's own tools.
    source: str | None = None
    #: The Python type of each argument (`@tool` reads them from the signature): the model's JSON arguments are
    #: converted to them (classes, enums, dates) before the call. Arguments not named here are passed as JSON.
    argument_types: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    #: The name of the function's first parameter when it is annotated RunContext: it receives the call's context.
    context_parameter: str | None = None
    #: Parameters whose default is a pydantic Field(...): its default fills an argument the model leaves out.
    field_defaults: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    _validator: Validator = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {_NAME.pattern} (letters, digits, _ and -)")
        # A schema that names its dialect ($schema, e.g. draft-07 from an MCP server) is read in that dialect; its
        # $refs resolve inside it only (InputError otherwise), and nothing it names is ever fetched.
        object.__setattr__(self, "_validator", local_validator(self.parameters, f"tool {self.name} parameters"))

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters, strict=self.strict
        )

    def argument_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        found = errors_of(self._validator, dict(arguments), "the arguments object")
        if isinstance(found, str):
            return [f"(arguments): {found}"]
        return [
            f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}"
            for e in sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
        ]

    async def invoke(
        self, call_id: str, arguments: Mapping[str, Any], context: RunContext[Any] | None = None
    ) -> ToolOutcome:
        """Validate, convert, call (sync functions in a worker thread), and turn the outcome into a result block.
        `context` is what a tool with a RunContext parameter receives (the run's own, or None outside a run)."""
        started = time.perf_counter()

        def outcome(content: str, is_error: bool, images: tuple[ImageBlock, ...] = ()) -> ToolOutcome:
            return ToolOutcome(
                result=ToolResultBlock(tool_call_id=call_id, content=content, is_error=True if is_error else None),
                duration_ms=(time.perf_counter() - started) * 1000,
                images=images,
            )

        errors = await validating(self.argument_errors, arguments)  # bounded, but may take seconds: off the loop
        if errors:
            return outcome(f"invalid arguments for {self.name}: " + "; ".join(errors), True)
        try:
            converted = {k: from_json(v, self.argument_types.get(k, Any)) for k, v in arguments.items()}
        except Exception as e:  # a value the schema let through that the type refuses (a bad date, a validator)
            return outcome(f"invalid arguments for {self.name}: {_conversion_error(e)}", True)
        for name, field in self.field_defaults.items():
            if name not in converted:
                converted[name] = field.get_default(call_default_factory=True)
        if self.context_parameter is not None:
            converted[self.context_parameter] = context
        try:
            value = await asyncio.wait_for(self._call(converted), timeout=self.timeout)
        except TimeoutError:
            return outcome(f"tool {self.name} did not finish within {self.timeout:g} s and was abandoned", True)
        except Exception as e:
            return outcome(f"tool {self.name} raised {type(e).__name__}: {e}", True)
        return outcome(*encode_result(value, tool=self.name, limit=self.max_result_chars))

    async def _call(self, arguments: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**arguments)
        return await asyncio.to_thread(self.fn, **arguments)


def encode_result(value: Any, *, tool: str, limit: int) -> tuple[str, bool, tuple[ImageBlock, ...]]:
    """What a tool's return value becomes in its result block, as (content, is_error, images): a ToolOutput as it
    says; a str as it is; anything else as compact JSON (as pydantic's to_json and PydanticAI send it: every later
    request that replays the result carries fewer tokens), or an error result naming what a tool may return. The
    content is cut to `limit` characters with TRUNCATION_MARKER, and lone surrogates are replaced."""
    if isinstance(value, ToolOutput):
        return _clean(_truncate(value.content, limit)), value.is_error, value.images
    try:
        plain = value if isinstance(value, str) else to_json(value)
        text = plain if isinstance(plain, str) else compact_json(plain)
    except (TypeError, ValueError) as e:
        return (
            f"tool {tool} returned a {type(value).__name__}, which is not JSON ({e}); return str, "
            "numbers, booleans, None, lists, dicts, or a pydantic model, attrs class or dataclass of them",
            True,
            (),
        )
    return _clean(_truncate(text, limit)), False, ()


def _conversion_error(error: Exception) -> str:
    """One line for the model: a cattrs error group names its sub-errors, pydantic's ValidationError its fields."""
    subs = getattr(error, "exceptions", None)
    if subs:
        return "; ".join(_conversion_error(e) for e in subs)
    return " ".join(f"{type(error).__name__}: {error}".split())


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
    retry_safe: bool = False,
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
    retry_safe: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool: `@tool` or `@tool(requires_approval=True, timeout=10)`; `retry_safe=True` when
    calling it twice with the same arguments does no harm (a recovered run may repeat an interrupted call)."""

    def build(f: Callable[..., Any]) -> Tool:
        summary, arg_docs = _parse_docstring(inspect.getdoc(f) or "")
        context, types = argument_types(f)
        return Tool(
            name=name or f.__name__,
            description=description or summary or f.__name__.replace("_", " "),
            parameters=parameters_schema(f, arg_docs),
            fn=f,
            argument_types=types,
            context_parameter=context,
            field_defaults=field_defaults(f),
            requires_approval=requires_approval,
            timeout=timeout,
            max_result_chars=max_result_chars,
            strict=strict,
            retry_safe=retry_safe,
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


def argument_types(fn: Callable[..., Any]) -> tuple[str | None, dict[str, Any]]:
    """The RunContext parameter's name (None: the function takes none), and the type of each other parameter.
    TypeError naming the tool and the parameter for a RunContext that is not the first parameter."""
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())
    for i, param in enumerate(params):
        if i > 0 and is_run_context(hints.get(param.name)):
            raise TypeError(
                f"tool {fn.__name__}: parameter {param.name!r} is a RunContext but is not the first parameter; "
                "make it the first (def tool(ctx: RunContext[Deps], ...))"
            )
    context = params[0].name if params and is_run_context(hints.get(params[0].name)) else None
    types: dict[str, Any] = {}
    for p in params:
        if p.name != context:
            hint = hints.get(p.name, Any)
            # `x: int = Field(default=3, ge=1)`: pydantic's spelling of a default with constraints
            types[p.name] = Annotated[hint, p.default] if _is_field_info(p.default) else hint
    return context, types


def field_defaults(fn: Callable[..., Any]) -> dict[str, Any]:
    """The parameters whose default is a pydantic `Field(...)`: the FieldInfo, whose own default (or factory)
    fills the argument when the model leaves it out (Python would pass the FieldInfo itself)."""
    return {p.name: p.default for p in inspect.signature(fn).parameters.values() if _is_field_info(p.default)}


def _is_field_info(value: Any) -> bool:
    return type(value).__module__ == "pydantic.fields" and type(value).__name__ == "FieldInfo"


def parameters_schema(fn: Callable[..., Any], descriptions: Mapping[str, str] | None = None) -> dict[str, Any]:
    """JSON Schema of a function's keyword arguments (a first RunContext parameter is not one)."""
    context, hints = argument_types(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.name == context:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__}: *args / **kwargs cannot be described to a model; name each argument")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"tool {fn.__name__}: argument {param.name!r} is positional-only; models pass keywords")
        schema = json_schema_for(hints[param.name], f"tool argument {fn.__name__}({param.name})")
        if descriptions and param.name in descriptions:
            schema["description"] = descriptions[param.name]
        default = param.default
        if _is_field_info(default):
            default = param.empty if default.is_required() else default.get_default(call_default_factory=True)
        if default is param.empty:
            required.append(param.name)
        elif default is None or isinstance(default, str | int | float | bool):
            schema["default"] = default
        elif isinstance(default, enum.Enum):
            schema["default"] = default.value
        properties[param.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return out
