"""Against a real OpenAI-compatible server (llama.cpp's llama-server, vLLM, ...), when one is running.

Set SEGUE_TEST_OPENAI_COMPAT_URL to its base URL (and SEGUE_TEST_OPENAI_COMPAT_VENDOR to its catalog vendor,
default llamacpp). Without it the test is skipped: nothing here touches the network otherwise.
"""

from __future__ import annotations

import os

import pytest

from segue import Agent, ModelSettings
from segue.providers import OpenAIChatProvider

URL = os.environ.get("SEGUE_TEST_OPENAI_COMPAT_URL")
VENDOR = os.environ.get("SEGUE_TEST_OPENAI_COMPAT_VENDOR", "llamacpp")
#: The model named in requests; llama-server answers with its own alias whatever this says (a served-model note).
MODEL = os.environ.get("SEGUE_TEST_OPENAI_COMPAT_MODEL", "local-model")

pytestmark = pytest.mark.skipif(
    not URL,
    reason="no OpenAI-compatible server: start one, e.g. `llama-server -m gemma-3-270m-it-Q8_0.gguf --port 8080 "
    "--jinja` (llama.cpp; --jinja for tool calls), then set SEGUE_TEST_OPENAI_COMPAT_URL=http://127.0.0.1:8080/v1",
)


async def test_model_settings_limit_the_answer_and_the_result_says_how_it_stopped() -> None:
    assert URL is not None
    driver = OpenAIChatProvider(MODEL, base_url=URL, vendor=VENDOR)
    agent = Agent(driver, "Answer in one short sentence.", model_settings=ModelSettings(max_tokens=8, temperature=0))
    result = await agent.run("Tell me a long story about the sea.")
    assert result.status == "success", result.error
    assert result.usage.output_tokens <= 8  # the server honoured max_tokens
    assert result.stop_reason in ("end", "max_tokens")
    if result.stop_reason == "max_tokens":
        assert "output-truncated" in [n.kind for n in result.notes or []]
    # A self-hosted path costs 0 USD, priced as such (catalog pricing.self_hosted), whatever model answered.
    assert result.cost is not None and result.cost.usd == 0.0
    assert all(p.self_hosted for p in result.cost.prices)
