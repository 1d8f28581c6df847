"""One table of provider kinds (segue.providers.registry): the lazy exports of segue.providers and `segue serve`'s
config both read it, and it agrees with schemas/serve.schema.json (issue 25: a vendor is added in one registry)."""

from __future__ import annotations

import importlib
import json

import pytest

import segue.providers
from segue.apps.protocol import config
from segue.providers.registry import BY_KIND, KINDS, LAZY, OPTIONS, kinds_taking
from tests._support.environment import REPO

SCHEMA = json.loads((REPO / "schemas" / "serve.schema.json").read_text(encoding="utf-8"))


def test_the_kinds_are_the_schemas_provider_kinds() -> None:
    assert [k.kind for k in KINDS] != []
    assert sorted(BY_KIND) == sorted(SCHEMA["$defs"]["ProviderKind"]["enum"])


def test_every_option_of_the_provider_config_belongs_to_some_kind() -> None:
    properties = set(SCHEMA["$defs"]["ProviderConfig"]["properties"]) - {"kind", "model"}
    assert set(OPTIONS) == properties
    assert {o for k in KINDS for o in k.options} == properties


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_each_kinds_driver_is_where_the_table_says(kind: object) -> None:
    from segue.providers.registry import ProviderKind

    assert isinstance(kind, ProviderKind)
    driver = getattr(importlib.import_module(kind.module), kind.driver)
    assert driver.__name__ == kind.driver
    if kind.module.startswith("segue.providers."):
        assert getattr(segue.providers, kind.driver) is driver  # the lazy export reads the same table
    if kind.twin_kind is not None:
        assert BY_KIND[kind.twin_kind].on_twin


def test_the_lazy_exports_are_the_tables_drivers_and_failover() -> None:
    assert set(LAZY) == {k.driver for k in KINDS if k.kind != "scripted"} | {"Failover"}
    assert set(LAZY) <= set(segue.providers.__all__)


def test_the_serve_config_checks_options_against_the_table() -> None:
    assert config._ONLY_FOR["thinking"] == ("anthropic", "twin-anthropic") == kinds_taking("thinking")
    assert config._ONLY_FOR["cache_mode"] == ("openai_responses", "twin-openai", "openai_chat", "openrouter")
    assert config._KEY_VARIABLES["anthropic"] == (
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"),
        "twin-anthropic",
    )
    assert set(config._KEY_VARIABLES) == {"anthropic", "openai_responses", "openai_chat"}
