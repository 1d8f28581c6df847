"""When the twin refuses for a reason that is not an outage (an exhausted ScriptedPolicy, a model it cannot serve),
the vendor-shaped error it sends makes the official clients and segue say what happened and what to do."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from anthropic.types.shared import ErrorResponse as AnthropicErrorResponse
from openai.types.shared import ErrorObject as OpenAIErrorObject

from segue._core.contracts import Provider, ProviderRequest
from segue.errors import ProviderError
from segue.generated import Message, TextBlock
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider
from segue_twin import ScriptedPolicy, Twin, rules_for
from segue_twin.rules import CacheRules

EXHAUSTED = (
    "twin: the ScriptedPolicy has no answer left (it was given 1 answer and this is request 2); give it more "
    "answers, or check that the client does not retry"
)
OUTAGE_ADVICE = "overloaded"


def only(model: str) -> Any:
    """A rules source that serves one model and refuses every other, as an app catalog without the model would."""

    def rules(name: str, vendor: str) -> CacheRules:
        if name != model:
            raise ValueError(f"no catalog entry for {name!r}; add it to the app catalog")
        return rules_for(name, vendor)

    return rules


async def test_an_exhausted_script_is_a_400_invalid_request_that_says_what_to_do() -> None:
    """Retrying cannot help a script with no answers left, so it is a 4xx (the official clients retry only 408,
    409, 429 and 5xx: `_should_retry` in the pinned SDKs' `_base_client.py`) with the twin's own message."""
    twin = Twin(policy=ScriptedPolicy(["one"]))
    claude = twin.anthropic_client()
    ask = [{"role": "user", "content": "a"}]
    first = await claude.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=ask)  # type: ignore[arg-type]
    assert first.content[0].type == "text" and first.content[0].text == "one"
    with pytest.raises(anthropic.BadRequestError) as refused:
        await claude.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=ask)  # type: ignore[arg-type]
    body = AnthropicErrorResponse.model_validate(refused.value.body)
    assert (body.error.type, body.error.message) == ("invalid_request_error", EXHAUSTED)

    gpt = Twin(policy=ScriptedPolicy(["one"])).openai_client()
    await gpt.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "a"}])
    with pytest.raises(openai.BadRequestError) as caught:
        await gpt.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "a"}])
    error = OpenAIErrorObject.model_validate(caught.value.body)
    assert (error.type, error.message) == ("invalid_request_error", EXHAUSTED)


async def test_a_model_the_twin_cannot_serve_is_a_404_as_the_vendors_answer_it() -> None:
    """Rule: a model the vendor does not serve is a 404 - Anthropic `{"type":"error","error":{"type":
    "not_found_error","message":"model: sonnet4"}}` (captured in anthropics/claude-code#5349; the pinned SDK's
    `NotFoundErrorObject.type: Literal["not_found_error"]`), OpenAI `{"error":{"message":"The model `gpt-4o` does
    not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":
    "model_not_found"}}` (captured in rd-1-2022/ai-openai-helloworld#9)."""
    twin = Twin(rules=only("gpt-4.1"))
    with pytest.raises(anthropic.NotFoundError) as caught:
        await twin.anthropic_client().messages.create(
            model="claude-nope-1", max_tokens=64, messages=[{"role": "user", "content": "a"}]
        )
    body = AnthropicErrorResponse.model_validate(caught.value.body)
    assert body.error.type == "not_found_error"
    assert body.error.message.startswith("twin: cannot serve model 'claude-nope-1': no catalog entry")

    gpt = twin.openai_client()
    with pytest.raises(openai.NotFoundError) as missing:
        await gpt.responses.create(model="gpt-nope", input="a")
    error = OpenAIErrorObject.model_validate(missing.value.body)
    assert (error.type, error.code) == ("invalid_request_error", "model_not_found")
    assert error.message.startswith("twin: cannot serve model 'gpt-nope'")
    served = await gpt.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "a"}])
    assert served.choices[0].message.content  # the twin keeps serving the model it has rules for


async def test_a_missing_openai_model_is_a_400_naming_the_parameter() -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await Twin().openai_client().chat.completions.create(model="", messages=[{"role": "user", "content": "a"}])
    assert caught.value.body == {
        "message": "Missing required parameter: 'model'.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "missing_required_parameter",
    }


def _drivers(twin: Twin, model_of: dict[str, str]) -> list[Provider]:
    return [
        AnthropicProvider(model_of["anthropic"], client=twin.anthropic_client()),
        OpenAIChatProvider(model_of["openai"], client=twin.openai_client()),
        OpenAIResponsesProvider(model_of["openai"], client=twin.openai_client()),
    ]


async def _refusal(provider: Provider, streaming: bool) -> ProviderError:
    request = ProviderRequest(
        system="s", messages=[Message(role="user", content=[TextBlock(text="hi")])], tools=[], stable_head=""
    )
    with pytest.raises(ProviderError) as caught:
        if streaming:
            async for _ in provider.stream(request):
                pass
        else:
            await provider.complete(request)
    return caught.value


@pytest.mark.parametrize("streaming", [False, True])
async def test_segue_passes_the_twins_message_on_with_advice_that_is_not_about_an_outage(streaming: bool) -> None:
    served = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}
    for provider in _drivers(Twin(policy=ScriptedPolicy([])), served):
        error = await _refusal(provider, streaming)
        assert (error.kind, error.status_code, error.retryable) == ("bad_request", 400, False)
        assert error.vendor_message is not None and error.vendor_message.startswith(
            "twin: the ScriptedPolicy has no answer left (it was given 0 answers"
        )
        assert "give it more answers, or check that the client does not retry. What to do: do what the " in str(error)
        assert OUTAGE_ADVICE not in str(error)

    unknown = {"anthropic": "claude-nope-1", "openai": "gpt-nope"}
    for provider in _drivers(Twin(rules=only("gpt-4.1")), unknown):
        error = await _refusal(provider, streaming)
        assert (error.kind, error.status_code, error.retryable) == ("bad_request", 404, False)
        assert f"twin: cannot serve model '{provider.model}'" in str(error)
        assert "What to do: the vendor does not serve this model (or this path) to this key: check the model id" in str(
            error
        )
        assert OUTAGE_ADVICE not in str(error)
