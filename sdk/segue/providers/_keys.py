"""A driver built with no client and no credentials refuses, naming the variable to set and the way offline.

A driver without its key used to talk to segue's twin on its own, so a deployment that lost its key recorded
`success` runs with the twin's made-up answers. Now the twin serves only a client the app passes
(`client=Twin().anthropic_client()`), and each call it answers is recorded as the twin's (contracts.TWIN_HEADER).

The check runs when the driver is built, as the official clients read their variables then: without a provider
no agent exists, so no run row is written. An app that loads its key later (a .env read in `main`) builds the
driver after that, or passes `client=` itself.
"""

from __future__ import annotations

import os

from segue.errors import ProviderError

#: How to run offline, per driver: a client of segue's twin (which emulates Anthropic and OpenAI, not OpenRouter).
TWIN_CLIENT = {
    "anthropic": "pass client=Twin().anthropic_client() (from segue.twin import Twin)",
    "openai": "pass client=Twin().openai_client() (from segue.twin import Twin)",
    "openrouter": "segue's twin does not emulate OpenRouter: use AnthropicProvider or OpenAIChatProvider with "
    "client=Twin().anthropic_client() / Twin().openai_client() (from segue.twin import Twin)",
}


def require_credentials(driver: str, model: str, vendor: str, variables: tuple[str, ...], *, client: str) -> None:
    """Raise unless one of `variables` (the vendor's key first, then its token or base-URL variables) is set.

    `client`: what the app could pass instead, e.g. "anthropic.AsyncAnthropic(api_key=...)".
    """
    if any(os.environ.get(name) for name in variables):
        return
    also = f" (or {' / '.join(variables[1:])})" if len(variables) > 1 else ""
    raise ProviderError(
        f"{driver}({model!r}) has no API key: set {variables[0]}{also}, or pass client={client}. To run offline "
        f"on segue's twin (an emulator of the vendor's API, not a model; its runs are recorded as the twin's), "
        f"{TWIN_CLIENT[vendor]}",
        vendor=vendor,
        kind="auth",
    )
