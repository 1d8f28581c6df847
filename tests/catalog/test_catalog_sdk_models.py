"""Every model id the pinned SDKs name has a catalog row or a left-out entry with its reason, and resolves.

The ids come from the SDKs' model literal types (`anthropic.types.Model`, `openai.types.shared.ChatModel` and
`ResponsesModel`), the list of ids users will pass. The `dev` extra pins the SDK versions, so this test is
deterministic; bumping a pin that names a new model fails here until the catalog has the model or says why not.
"""

from __future__ import annotations

import re
import sys
import typing
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest
from anthropic.types import Model as AnthropicModel
from openai.types.shared import ChatModel, ResponsesModel

from segue.apps.cli.main import main
from segue.catalog import Catalog
from tests._support import warm_cli

REPO = Path(__file__).resolve().parents[2]
PINNED = {"anthropic": "2.15.0", "openai": "3.57.0"}  # the `dev` extra in pyproject.toml


def literals(tp: object) -> Iterator[str]:
    """Every string literal inside a (possibly nested) Union / Literal type alias."""
    if typing.get_origin(tp) is typing.Literal:
        yield from (a for a in typing.get_args(tp) if isinstance(a, str))
        return
    for arg in typing.get_args(tp):
        yield from literals(arg)


def sdk_ids() -> list[tuple[str, str]]:
    ids = {(m, "anthropic") for m in literals(AnthropicModel)}
    ids |= {(m, "openai") for m in [*literals(ChatModel), *literals(ResponsesModel)]}
    return sorted(ids, key=lambda p: (p[1], p[0]))


SDK_IDS = sdk_ids()


def test_the_sdks_are_the_pinned_versions() -> None:
    found = {"anthropic": anthropic.__version__, "openai": openai.__version__}
    assert found == PINNED, "install the dev extra (pip install -e '.[dev]'), or update PINNED with the pins"
    vendors = {vendor for _, vendor in SDK_IDS}
    assert vendors == {"anthropic", "openai"}, (
        "the literal walk found no ids for a vendor: did the SDK rename its type?"
    )


def test_a_model_the_sdk_retired_resolves_with_a_note_not_a_live_row(catalog: Catalog) -> None:
    """anthropic 2.15.0 dropped `claude-sonnet-4-5` from `Model`: the catalog keeps no live row for it.

    A retired id is a `left_out` entry whose reason starts with "retired:", so stored runs that name it (and
    `segue catalog explain`) still resolve, from the vendor's defaults, with the reason as the note.
    """
    assert ("claude-sonnet-4-5", "anthropic") not in SDK_IDS
    for model in ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929"):
        assert catalog.find_model(model, "anthropic") is None
        r = catalog.resolve(model, "anthropic")
        assert r.note is not None and "retired: anthropic SDK 2.15.0 removed it" in r.note
        assert r.layers[-1] == "vendor anthropic model_defaults"  # no model or model-vendor layer: not live


@pytest.mark.parametrize(("model", "vendor"), SDK_IDS, ids=[f"{v}:{m}" for m, v in SDK_IDS])
def test_every_sdk_model_id_has_a_row_or_a_reason(catalog: Catalog, model: str, vendor: str) -> None:
    listed = catalog.find_model(model, vendor)
    left_out = catalog.left_out(model, vendor)
    assert (listed is None) != (left_out is None), (
        f"{model!r} ({vendor} SDK) needs exactly one of: a catalog row (models.json + model_vendors.json, or an "
        "alias of its base row) or a left_out.json entry with the reason"
    )
    r = catalog.resolve(model, vendor)
    if listed is not None:
        assert r.note is None and r.vendor == vendor and r.layers[-1] == f"model-vendor {listed}@{vendor}"
        notes = catalog.model(listed).notes or ""
        assert "Sources (read " in notes, f"{listed}: the note must name its sources (or say none was found)"
        assert r.cache_kind in ("block", "prefix", "breakpoint")
    else:
        assert left_out is not None and r.note is not None and left_out.reason in r.note


def test_left_out_entries_name_ids_the_sdks_still_name(catalog: Catalog) -> None:
    """A stale entry (an id a bumped SDK no longer names) is removed rather than kept as dead data.

    Retired ids are the exception: stored runs keep naming them, so their entry ("retired: ...") stays.
    """
    named = set(SDK_IDS)
    stale = [
        (m.id, m.vendor)
        for m in catalog._left_out.values()
        if (m.id, m.vendor) not in named and not m.reason.startswith("retired:")
    ]
    assert stale == []


def test_catalog_explain_exits_0_for_every_sdk_id_and_an_invented_one(capsys: pytest.CaptureFixture[str]) -> None:
    for model, vendor in [*SDK_IDS, ("gpt-9-experimental", "openai")]:
        assert main(["catalog", "explain", model, "--vendor", vendor]) == 0, (model, vendor)
    capsys.readouterr()


def test_catalog_explain_for_a_made_up_model_as_a_user_runs_it() -> None:
    out = warm_cli.run(
        [sys.executable, "-m", "segue.apps.cli.main", "catalog", "explain", "gpt-9-experimental", "--vendor", "openai"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1] == "not in the catalog: from the vendor's defaults"
    (line,) = [x for x in lines if x.startswith("llm.prefix_prompt_cache")]
    assert line.split()[1:4] == ["true", "vendor", "openai"]
    doc = (REPO / "docs" / "cli.md").read_text()
    shown = doc.split("$ segue catalog explain gpt-9-experimental --vendor openai\n", 1)[1].split("```", 1)[0]
    assert shown.splitlines() == lines, "docs/cli.md shows this command's output: keep it true"


def test_the_providers_doc_example_models_resolve(catalog: Catalog) -> None:
    """docs/providers.md builds Failover over claude-sonnet-4-6 and gpt-5.5: both are catalog rows."""
    text = (REPO / "docs" / "providers.md").read_text()
    assert re.search(r'AnthropicProvider\(\s*"claude-sonnet-4-6"', text)
    assert re.search(r'OpenAIResponsesProvider\(\s*"gpt-5.5"', text)
    sonnet, gpt = catalog.resolve("claude-sonnet-4-6", "anthropic"), catalog.resolve("gpt-5.5", "openai")
    assert (sonnet.note, gpt.note) == (None, None)
    assert gpt.cache_ttls == ["24h"]  # prompt_cache_retention: "For gpt-5.5, gpt-5.5-pro, and future models, only 24h"
