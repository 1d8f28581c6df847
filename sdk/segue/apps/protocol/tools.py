"""The tools a config file declares: HTTP callbacks, client-side tools and Python functions.

- `url`: segue POSTs `{"name", "arguments", "call_id", "run_id", "agent"}` as JSON; the response body (2xx) is the
  result the model sees, any other status an error result.
- `client: true` on stdio: a `tool/call` request to the client, whose answer is the result. On HTTP, where the
  server cannot call the client, and for a stdio client that said in initialize it answers no tool/call, the
  tool requires approval: the run pauses in waiting_approval and the client sends the result with `resume`
  (`tool_results`).
- `python`: `module:function`, imported once at start-up; a `segue.tool` object is used as it is.

Arguments are validated against `parameters` before any call (segue.tools.Tool), and every failure becomes an
error result the model sees, never a crash of the run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Literal

import attrs
from jsonschema.exceptions import SchemaError as JsonSchemaError

from segue.apps.protocol.rpc import ClientCallError, current_request
from segue.errors import InputError
from segue.generated import ToolCallBlock
from segue.generated.protocol import ToolCallParams, ToolCallResult
from segue.generated.serve import ToolConfig
from segue.tool_context import RunContext
from segue.tools import Tool, ToolOutcome, tool

Mode = Literal["stdio", "http"]
#: What a config entry builds: a Python function, an HTTP callback, or a tool the client runs.
ToolKind = Literal["python", "url", "client"]
DEFAULT_TIMEOUT = 60.0
_call: ContextVar[ToolCallBlock | None] = ContextVar("segue.apps.protocol.tool_call", default=None)


class ToolConfigError(ValueError):
    """A tool entry of the config file is wrong; `.pointer` is relative to the tool entry."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer


class ClientToolError(Exception):
    """The client reported the tool call as failed (is_error), or could not be asked."""


class ToolCallbackError(Exception):
    """The HTTP callback answered with an error status or could not be reached."""


@attrs.frozen(kw_only=True)
class CallAwareTool(Tool):
    """A Tool whose function can see the call it serves (id, name, arguments) through `current_call()`."""

    async def invoke(self, call_id: str, arguments: Any, context: RunContext[Any] | None = None) -> ToolOutcome:
        token = _call.set(ToolCallBlock(id=call_id, name=self.name, arguments=dict(arguments)))
        try:
            return await super().invoke(call_id, arguments, context)
        finally:
            _call.reset(token)


def current_call() -> ToolCallBlock | None:
    return _call.get()


def tool_kind(cfg: ToolConfig) -> ToolKind:
    """Which of url, client or python the entry is; a ToolConfigError unless it is exactly one."""
    given: tuple[tuple[ToolKind, bool], ...] = (
        ("url", cfg.url is not None),
        ("client", bool(cfg.client)),
        ("python", bool(cfg.python)),
    )
    kinds = [k for k, on in given if on]
    if len(kinds) != 1:
        got = " and ".join(kinds) if kinds else "none of them"
        raise ToolConfigError("", f"tool {cfg.name!r} needs exactly one of url, client: true or python; got {got}")
    return kinds[0]


def build_tool(cfg: ToolConfig, *, client_answers: bool) -> tuple[Tool, bool]:
    """The Tool for one config entry, and whether it is a client-side tool. `client_answers`: a client-side tool
    is a tool/call request to the client (stdio); otherwise it pauses the run for the client's result."""
    kinds = [tool_kind(cfg)]
    timeout = cfg.timeout_seconds if cfg.timeout_seconds is not None else DEFAULT_TIMEOUT
    if kinds == ["python"]:
        assert cfg.python is not None
        return _python_tool(cfg, cfg.python, timeout), False
    for key in ("description", "parameters"):
        if getattr(cfg, key) is None:
            raise ToolConfigError(
                "", f"tool {cfg.name!r} needs `{key}` (a {kinds[0]} tool has no signature to read it from)"
            )
    if kinds == ["url"]:
        assert cfg.url is not None
        return _make(cfg, _http_callback(cfg.url, cfg.name, timeout), timeout, bool(cfg.requires_approval)), False
    if not client_answers:
        # The server cannot call the client back: the run pauses and the client resumes with the result.
        return _make(cfg, _result_expected(cfg.name), timeout, True), True
    return _make(cfg, _ask_client(cfg.name), timeout, bool(cfg.requires_approval)), True


def _make(cfg: ToolConfig, fn: Callable[..., Any], timeout: float, requires_approval: bool) -> Tool:
    assert cfg.description is not None and cfg.parameters is not None
    try:
        return CallAwareTool(
            name=cfg.name,
            description=cfg.description,
            parameters=cfg.parameters,
            fn=fn,
            requires_approval=requires_approval,
            timeout=timeout,
        )
    except InputError as e:  # a $ref outside the schema, or nesting past the limit (segue._core.json_schema)
        raise ToolConfigError("/parameters", f"tool {cfg.name!r}: {e}") from None
    except JsonSchemaError as e:
        raise ToolConfigError(
            "/parameters", f"tool {cfg.name!r}: parameters is not a valid JSON Schema: {e.message}"
        ) from None


def _python_tool(cfg: ToolConfig, target: str, timeout: float) -> Tool:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ToolConfigError("/python", f"tool {cfg.name!r}: cannot import {module_name!r}: {e}") from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise ToolConfigError("/python", f"tool {cfg.name!r}: module {module_name!r} has no {attr!r}")
    try:
        if isinstance(fn, Tool):
            base = fn
        elif callable(fn):
            base = tool(fn)
        else:
            raise ToolConfigError("/python", f"tool {cfg.name!r}: {target} is a {type(fn).__name__}, not a function")
        return CallAwareTool(
            name=cfg.name,
            description=cfg.description if cfg.description is not None else base.description,
            parameters=cfg.parameters if cfg.parameters is not None else base.parameters,
            fn=base.fn,
            requires_approval=bool(cfg.requires_approval) or base.requires_approval,
            retry_safe=base.retry_safe,  # what `@tool(retry_safe=True)` says holds in a served agent too
            timeout=timeout if cfg.timeout_seconds is not None else base.timeout,
            max_result_chars=base.max_result_chars,
            strict=base.strict,
            argument_types=base.argument_types,
            context_parameter=base.context_parameter,
            field_defaults=base.field_defaults,
        )
    except InputError as e:
        raise ToolConfigError("/parameters", f"tool {cfg.name!r}: {e}") from None
    except (TypeError, ValueError) as e:
        raise ToolConfigError("/python", f"tool {cfg.name!r}: {target}: {e}") from None
    except JsonSchemaError as e:
        raise ToolConfigError(
            "/parameters", f"tool {cfg.name!r}: parameters is not a valid JSON Schema: {e.message}"
        ) from None


def _ask_client(name: str) -> Callable[..., Any]:
    async def ask(**arguments: Any) -> str:
        request, call = current_request(), current_call()
        if request is None or call is None or request.run_id is None:
            raise ClientToolError(f"{name} is a client-side tool and can only run inside a protocol request")
        params = ToolCallParams(
            request_id=request.request_id, agent=request.agent or "", run_id=request.run_id, call=call
        )
        try:
            result: ToolCallResult = await request.session.call("tool/call", params)
        except ClientCallError as e:
            raise ClientToolError(str(e)) from None
        if result.is_error:
            raise ClientToolError(result.content)
        return result.content

    return ask


def _result_expected(name: str) -> Callable[..., Any]:
    def missing(**arguments: Any) -> str:
        raise ClientToolError(
            f"{name} is a client-side tool: the client must send its result in resume.tool_results; none was sent"
        )

    return missing


def _http_callback(url: str, name: str, timeout: float) -> Callable[..., Any]:
    async def post(**arguments: Any) -> str:
        import httpx2

        request, call = current_request(), current_call()
        body = {
            "name": name,
            "arguments": arguments,
            "call_id": call.id if call else None,
            "run_id": request.run_id if request else None,
            "agent": request.agent if request else None,
        }
        try:
            async with httpx2.AsyncClient(timeout=timeout) as client:
                answer = await client.post(url, json=body)
        except httpx2.HTTPError as e:
            raise ToolCallbackError(f"POST {url} failed: {type(e).__name__}: {e}") from None
        if not 200 <= answer.status_code < 300:
            raise ToolCallbackError(f"POST {url} answered HTTP {answer.status_code}: {answer.text[:500]}")
        return answer.text

    return post
