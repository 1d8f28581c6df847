"""Why AnthropicProvider reads three private parts of the pinned anthropic SDK (2.15.0): there is no public way.

segue posts the exact bytes it built (tests/providers/test_posted_bytes.py), so it cannot call
`client.messages.create`, and what create adds to a call besides its body lives only in private modules: the
deprecated-model table (`anthropic._data.DEPRECATED_MODELS`), the models that warn on `thinking.type=enabled`
(`anthropic._data.MODELS_TO_WARN_WITH_THINKING_ENABLED`), the per-model non-streaming token limits
(`anthropic._constants.MODEL_NONSTREAMING_TOKENS`) and the timeout rule (`BaseClient._calculate_nonstreaming_timeout`).
The default timeout is public (`anthropic.DEFAULT_TIMEOUT`) and is read there. When an SDK release publishes one of
these, the first test fails and names it: switch segue.providers.anthropic to the public name.
"""

from __future__ import annotations

import ast
import inspect

import anthropic
from anthropic.resources.messages.messages import AsyncMessages

from segue.providers import anthropic as driver
from tests._support.environment import REPO

#: What AnthropicProvider._post_options reads from the SDK besides its public names.
PRIVATE = ("MODEL_NONSTREAMING_TOKENS", "DEPRECATED_MODELS", "MODELS_TO_WARN_WITH_THINKING_ENABLED")


def test_the_sdk_publishes_none_of_the_tables_messages_create_reads() -> None:
    public = set(dir(anthropic)) | set(getattr(anthropic, "__all__", ()))
    published = [name for name in PRIVATE if name in public]
    assert not published, (
        f"the anthropic SDK now publishes {published}: read them from `anthropic`, not its private modules"
    )
    assert "DEFAULT_TIMEOUT" in public  # the one that is public, which the driver reads publicly
    assert not [n for n in dir(anthropic.AsyncAnthropic) if "nonstreaming_timeout" in n and not n.startswith("_")]


def test_messages_create_reads_exactly_those_tables_so_segue_must_too() -> None:
    create = inspect.getsource(AsyncMessages.create)
    for name in (*PRIVATE, "_calculate_nonstreaming_timeout", "DEFAULT_TIMEOUT"):
        assert name in create, f"messages.create no longer reads {name}: segue's copy of its behaviour is stale"
    post_options = inspect.getsource(driver.AnthropicProvider._post_options)
    for name in (*PRIVATE, "_calculate_nonstreaming_timeout", "DEFAULT_TIMEOUT"):
        assert name in post_options
    assert "anthropic._constants import DEFAULT_TIMEOUT" not in inspect.getsource(driver)


def test_no_other_private_part_of_an_official_sdk_is_used() -> None:
    """Across sdk/ (runtime and twin), the only private names of the anthropic and openai SDKs read are the three
    tables and the timeout rule above (openai 3.57.0: none; its retry delay is a figure in providers/_common.py,
    not an import)."""
    used = set()
    for path in sorted((REPO / "sdk").rglob("*.py")):
        if "generated" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in {"anthropic", "openai"}:
                private = any(part.startswith("_") for part in (node.module or "").split("."))
                used |= {f"{node.module}.{a.name}" for a in node.names if private or a.name.startswith("_")}
            elif isinstance(node, ast.Import):
                used |= {
                    a.name for a in node.names if a.name.split(".")[0] in {"anthropic", "openai"} and "._" in a.name
                }
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                if isinstance(base, ast.Attribute) and base.attr in {"client", "_sdk"}:
                    used.add(f"{base.attr}.{node.attr}")
    assert used == {
        "anthropic._constants.MODEL_NONSTREAMING_TOKENS",
        "anthropic._data.DEPRECATED_MODELS",
        "anthropic._data.MODELS_TO_WARN_WITH_THINKING_ENABLED",
        "client._calculate_nonstreaming_timeout",
    }
