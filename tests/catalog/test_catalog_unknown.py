"""Catalog: models it does not list resolve through the cascade; aliases; left-out ids; bad input before any row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from segue.catalog import Catalog, CatalogError, CatalogLookupError, check_dir
from segue.generated import Usage

SCHEMA_REF = "../schemas/catalog.schema.json"


def write(directory: Path, name: str, version: int = 2, **rows: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps({"$schema": SCHEMA_REF, "version": version, **rows}, indent=2))
    return directory / name


def load(*dirs: Path) -> Catalog:
    return Catalog.load(extra_dirs=dirs, env=False)


def only_error(d: Path) -> CatalogError:
    with pytest.raises(CatalogError) as info:
        load(d)
    return info.value


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load()


# --- models the catalog does not list -------------------------------------------------------------------------


def test_an_unknown_model_resolves_from_the_type_and_the_vendor_defaults(cat: Catalog) -> None:
    r = cat.resolve("gpt-9-experimental", "openai")
    assert r.note == "not in the catalog: from the vendor's defaults"
    assert r.layers == ("model type llm (default)", "vendor openai model_defaults")
    assert (r.model, r.vendor, r.api_name, r.wire, r.priority) == (
        "gpt-9-experimental", "openai", "gpt-9-experimental", "openai_responses", None,
    )  # fmt: skip
    assert r.prefix_prompt_cache is True  # the vendor's defaults beat the conservative type
    assert (r.cache_min_tokens, r.cache_increment_tokens, r.cache_ttls) == (1024, 128, ["24h", "in_memory"])
    assert r.supports_reasoning is False  # the type answers what the vendor does not
    src = r.source("llm", "prefix_prompt_cache")
    assert src is not None and src.file.endswith("catalogs/vendors.json") and src.layer.startswith("vendor openai")
    assert cat.resolve("gpt-9-experimental", "openai") is r  # resolved once, then a dict read


def test_an_unknown_model_has_no_price_and_no_cost(cat: Catalog) -> None:
    r = cat.resolve("gpt-9-experimental", "openai")
    assert r.pricing is None
    with pytest.raises(CatalogLookupError) as info:
        cat.cost(Usage(input_tokens=1000, output_tokens=10), "gpt-9-experimental", "openai")
    assert str(info.value).startswith(
        "no cost for gpt-9-experimental@openai (not in the catalog: from the vendor's defaults): the catalog has "
        "no input/output price"
    )
    assert "no cost is computed" in cat.explain_text("gpt-9-experimental", "openai")


def test_a_likely_typo_is_a_note_not_a_failure(cat: Catalog) -> None:
    r = cat.resolve("claude-sonet-4-6", "anthropic")
    assert (
        r.note == "not in the catalog: from the vendor's defaults; did you mean 'claude-sonnet-4-6'?"
    )  # claude-sonnet-4-5 is retired (a left-out id, not a listed one): not offered as a correction
    assert (r.cache_kind, r.prefix_prompt_cache, r.cache_max_breakpoints) == ("block", False, 4)
    assert r.cache_min_tokens is None  # minimums are per model: the vendor row has none to give
    far = cat.resolve("gpt-9-experimental", "openai")
    assert "did you mean" not in (far.note or "")  # not close to any listed name: no guess offered
    with pytest.raises(CatalogLookupError, match="unknown model 'claude-sonet-4-6'; did you mean"):
        cat.model_for("claude-sonet-4-6")  # the strict lookup still refuses


async def test_the_twin_serves_an_unlisted_model_with_the_vendor_defaults() -> None:
    """The twin used to answer 500 for a model missing from the catalog; it now applies OpenAI's defaults (an
    exact-prefix cache from 1,024 tokens in 128-token steps) through the same cascade."""
    from segue_twin import Twin, rules_for

    rules = rules_for("gpt-9-experimental", "openai")
    assert (rules.style, rules.min_cacheable_tokens, rules.increment_tokens) == ("prefix", 1024, 128)
    client = Twin().openai_client()
    prompt = "Describe the orders table. " * 400  # about 2,400 tokens: above the minimum
    first = await client.responses.create(model="gpt-9-experimental", input=prompt, prompt_cache_key="k")
    again = await client.responses.create(model="gpt-9-experimental", input=prompt, prompt_cache_key="k")
    assert first.usage is not None and again.usage is not None
    assert first.usage.input_tokens_details.cached_tokens == 0
    cached = again.usage.input_tokens_details.cached_tokens
    assert cached >= 1024 and cached % 128 == 0


def test_without_a_vendor_only_the_default_type_answers(cat: Catalog) -> None:
    r = cat.resolve("house-model")
    assert r.note == "not in the catalog: from the default model type"
    assert r.layers == ("model type llm (default)",) and r.vendor is None and r.api_name is None
    assert (r.prefix_prompt_cache, r.cache_kind) == (False, "none")


def test_no_default_model_type_leaves_only_the_vendor(tmp_path: Path) -> None:
    types = json.loads((Path(__file__).parents[2] / "catalogs" / "model_types.json").read_text())
    types["model_types"][0]["default_for_unknown_models"] = False
    write(tmp_path / "app", "model_types.json", model_types=types["model_types"])
    r = load(tmp_path / "app").resolve("gpt-9-experimental", "openai")
    assert r.layers == ("vendor openai model_defaults",)
    assert r.supports_reasoning is None and r.prefix_prompt_cache is True


def test_two_default_model_types_are_refused(tmp_path: Path) -> None:
    write(
        tmp_path / "app",
        "types.json",
        model_types=[{"id": "embedding", "name": "E", "default_for_unknown_models": True}],
    )
    err = only_error(tmp_path / "app")
    assert err.pointer == "/model_types/0/default_for_unknown_models"
    assert "'llm'" in str(err) and "already the default" in str(err)


def test_unknown_vendors_stay_an_error(cat: Catalog) -> None:
    with pytest.raises(CatalogLookupError) as info:
        cat.resolve("gpt-9-experimental", "opnai")
    assert str(info.value).startswith("unknown vendor 'opnai'; did you mean 'openai'?")
    assert "add it to a catalog directory" in str(info.value)


@pytest.mark.parametrize("bad", [5, None, ["gpt-5.5"], b"gpt-5.5", ""])
def test_a_model_id_that_is_not_a_string_is_refused(cat: Catalog, bad: Any) -> None:
    for call in (cat.resolve, cat.explain, cat.explain_text, cat.find_model):
        with pytest.raises(CatalogLookupError) as info:
            call(bad)  # type: ignore[operator]
        assert str(info.value).startswith("a model id must be a non-empty string, got ")
        assert info.value.expected == "a non-empty string model id"
    with pytest.raises(CatalogLookupError, match="a vendor id must be a non-empty string, got int 7"):
        cat.resolve("gpt-5.5", 7)  # type: ignore[arg-type]


def test_a_row_whose_model_id_is_not_a_string_fails_at_load(tmp_path: Path) -> None:
    write(tmp_path / "app", "x.json", models=[{"id": 42, "model_type": "llm"}])
    err = only_error(tmp_path / "app")
    assert (err.pointer, err.expected) == ("/models/0/id", "a string")
    assert str(err).endswith("x.json#/models/0/id: expected a string, got 42")


# --- aliases and left-out ids ---------------------------------------------------------------------------------------


def test_a_dated_snapshot_is_an_alias_of_its_base_row(cat: Catalog) -> None:
    base = cat.resolve("claude-haiku-4-5", "anthropic")
    assert cat.resolve("claude-haiku-4-5-20251001", "anthropic") is base
    assert cat.find_model("gpt-4o-2024-08-06") == "gpt-4o"
    assert cat.model("o3-2025-04-16").id == "o3"
    assert "claude-haiku-4-5-20251001 is an alias of claude-haiku-4-5" in cat.explain_text(
        "claude-haiku-4-5-20251001", "anthropic"
    )


def test_an_alias_naming_another_model_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "app", "x.json", models=[{"id": "m1", "model_type": "llm", "aliases": ["m1-old", "gpt-5.5"]}])
    err = only_error(tmp_path / "app")
    assert err.pointer == "/models/0/aliases/1"
    assert "got 'gpt-5.5'" in str(err) and "it already names model 'gpt-5.5'" in str(err)


def test_a_left_out_id_resolves_with_its_reason(cat: Catalog) -> None:
    entry = cat.left_out("gpt-4o-audio-preview", "openai")
    assert entry is not None and entry.reason.startswith("audio model")
    r = cat.resolve("gpt-4o-audio-preview", "openai")
    assert r.note == f"not in the catalog: from the vendor's defaults; left out on purpose: {entry.reason}"


def test_a_left_out_entry_must_not_contradict_a_row(tmp_path: Path) -> None:
    write(tmp_path / "app", "x.json", left_out=[
        {"id": "gpt-5.5-2026-04-23", "vendor": "openai", "reason": "r"},
        {"id": "x-model", "vendor": "acme", "reason": "r"},
    ])  # fmt: skip
    errors = check_dir(tmp_path / "app")
    assert [(e.pointer, e.expected) for e in errors] == [
        ("/left_out/1/vendor", "an existing vendor id"),
        ("/left_out/0/id", "an id the catalog has no model row or alias for"),
    ]
    assert "model 'gpt-5.5' has it" in str(errors[1])


# --- bad input in files: one clear error, nothing built -----------------------------------------------------------


def test_a_row_naming_an_unknown_vendor_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "app", "x.json", model_vendors=[
        {"model": "gpt-5.5", "vendor": "opnai", "role": "inference_provider", "priority": 1}])  # fmt: skip
    err = only_error(tmp_path / "app")
    assert (err.pointer, err.expected) == ("/model_vendors/0/vendor", "an existing vendor id")
    assert "got 'opnai'; did you mean 'openai'?" in str(err)


def test_a_repeated_key_is_refused_with_its_pointer(tmp_path: Path) -> None:
    d = tmp_path / "app"
    d.mkdir()
    (d / "x.json").write_text(
        '{"$schema": "../schemas/catalog.schema.json", "version": 2, "models": [\n'
        '  {"id": "m1", "model_type": "llm", "configuration": {"pricing": {"input": 1, "input": 2}}}]}'
    )
    err = only_error(d)
    assert err.pointer == "/models/0/configuration/pricing"
    assert err.expected == "each key once per object"
    assert "'input' appears more than once" in str(err)


def test_a_negative_price_names_file_and_pointer(tmp_path: Path) -> None:
    pricing = {"input": 1, "cache_write": {"5m": -2}}
    write(tmp_path / "app", "x.json", models=[{"id": "m1", "model_type": "llm", "configuration": {"pricing": pricing}}])
    err = only_error(tmp_path / "app")
    assert err.pointer == "/models/0/configuration/pricing/cache_write/5m"
    assert str(err).endswith("x.json#/models/0/configuration/pricing/cache_write/5m: expected a number >= 0, got -2")


def test_a_write_price_for_a_ttl_the_path_does_not_offer(tmp_path: Path) -> None:
    write(tmp_path / "app", "x.json", model_vendors=[
        {"model": "gpt-5.6-luna", "vendor": "openai", "role": "inference_provider", "priority": 100,
         "configuration": {"llm": {"cache_kind": "breakpoint", "cache_ttls": ["30m", "12h"]},
                           "pricing": {"cache_write": {"1h": 0.4}}}},
    ])  # fmt: skip
    err = only_error(tmp_path / "app")
    assert err.file is not None and err.file.endswith("app/x.json")
    assert err.pointer == "/model_vendors/0/configuration/pricing/cache_write/1h"
    assert err.expected == "a cache_write TTL the serving path offers"
    assert "got '1h'; gpt-5.6-luna@openai offers '30m', '12h'" in str(err)


def test_a_version_1_file_is_migrated_and_its_write_prices_kept(tmp_path: Path) -> None:
    pricing = {"input": 1, "output": 2, "cache_write_5m": 1.25, "cache_write_1h": 2}
    row = {"model": "m1", "vendor": "anthropic", "role": "inference_provider", "priority": 1}
    model = {"id": "m1", "model_type": "llm", "configuration": {"pricing": pricing}}
    write(tmp_path / "app", "v1.json", version=1, models=[model], model_vendors=[row])
    r = load(tmp_path / "app").resolve("m1", "anthropic")
    assert r.get("pricing") == {"input": 1, "output": 2, "cache_write": {"5m": 1.25, "1h": 2}}
    usage = Usage(input_tokens=3_000_000, output_tokens=0, cache_write_tokens=2_000_000,
                  cache_write_tokens_by_ttl={"1h": 1_000_000})  # fmt: skip
    assert r.cost(usage) == pytest.approx(1 + 1.25 + 2)


def test_a_version_1_write_price_on_a_path_without_that_ttl_says_where_it_came_from(tmp_path: Path) -> None:
    write(tmp_path / "app", "v1.json", version=1, model_vendors=[
        {"model": "gpt-4.1", "vendor": "openai", "role": "inference_provider", "priority": 100,
         "configuration": {"pricing": {"cache_write_5m": 2.5}}}])  # fmt: skip
    err = only_error(tmp_path / "app")
    assert "gpt-4.1@openai offers '24h', 'in_memory'" in str(err)
    assert err.pointer == "/model_vendors/0/configuration/pricing/cache_write/5m"
    assert "is a version-1 file, whose cache_write_5m / cache_write_1h became cache_write['5m'] / ['1h']" in str(err)


def test_an_unlisted_id_with_the_gpt_5_6_naming_resolves_to_that_familys_cache(cat: Catalog) -> None:
    """`gpt-6.3-sol` is newer than the catalog: the openai vendor row's model pattern 'GPT-5.6 and later' gives it
    the GPT-5.6 rows' breakpoint cache (not the pre-GPT-5.6 defaults), and the note says so. No prices: cost
    refuses. An id without a GPT-5.6 family name, or an older version, keeps the vendor's defaults."""
    r = cat.resolve("gpt-6.3-sol", "openai")
    listed = cat.resolve("gpt-6.2-sol", "openai")
    keys = ("cache_kind", "cache_max_breakpoints", "cache_match_breakpoints", "cache_ttls", "cache_prewarm")
    assert {k: r.get("llm", k) for k in keys} == {k: listed.get("llm", k) for k in keys}
    assert (r.cache_kind, r.cache_ttls, r.prefix_prompt_cache) == ("breakpoint", ["30m", "12h"], False)
    assert r.note is not None and "its pattern 'GPT-5.6 and later'" in r.note
    assert r.layers[-1] == "vendor openai pattern 'GPT-5.6 and later'"
    source = r.source("llm", "cache_kind")
    assert str(source).startswith("catalogs/vendors.json#/vendors/") and "/model_patterns/0/" in str(source)
    assert "Supported for gpt-5.6 and later models" in (cat.row_notes(source) or "")
    with pytest.raises(CatalogLookupError, match=r"no cost for gpt-6\.3-sol@openai"):
        cat.cost(Usage(input_tokens=10, output_tokens=1), "gpt-6.3-sol", "openai")
    for older in ("gpt-9-experimental", "gpt-5.5-sol", "gpt-4.1-nano-x"):
        assert cat.resolve(older, "openai").cache_kind == "prefix", older
    assert cat.resolve("gpt-6.3-sol", "anthropic").cache_kind == "block"  # patterns are the vendor's own


def test_a_model_pattern_that_does_not_compile_is_a_load_error(tmp_path: Path) -> None:
    vendors = {
        "$schema": "x",
        "version": 2,
        "vendors": [{"id": "acme", "name": "Acme", "model_patterns": [{"name": "new", "match": "acme-(6"}]}],
    }
    (tmp_path / "vendors.json").write_text(json.dumps(vendors))
    with pytest.raises(CatalogError) as caught:
        Catalog.load([tmp_path], env=False)
    assert caught.value.pointer == "/vendors/0/model_patterns/0/match"
    assert "a Python regular expression" in str(caught.value) and "'acme-(6'" in str(caught.value)
