"""Catalog: loading, validation errors with file + pointer, the cascade, lookups, pricing."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

import segue.catalog.files as catalog_mod
from segue.catalog import (
    Catalog,
    CatalogError,
    CatalogLookupError,
    Resolved,
    Source,
    check_dir,
    merge_configs,
    packaged_catalog_dir,
)
from segue.generated import Usage

SCHEMA_REF = "../schemas/catalog.schema.json"


def write(directory: Path, name: str, version: int = 2, **rows: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    doc = {"$schema": SCHEMA_REF, "version": version, **rows}
    path = directory / name
    path.write_text(json.dumps(doc, indent=2))
    return path


def llm(**keys: Any) -> dict[str, Any]:
    return {"llm": keys}


def cascade_dir(
    tmp_path: Path,
    *,
    type_cfg: Any = None,
    model_cfg: Any = None,
    vendor_cfg: Any = None,
    row_cfg: Any = None,
    developer_cfg: Any = None,
) -> Path:
    """One test model `t-model` of type `t-type`, served by `t-vendor`; each layer's bag is given."""

    def bag(key: str, value: Any) -> dict[str, Any]:
        return {} if value is None else {key: value}

    d = tmp_path / "app"
    write(
        d,
        "rows.json",
        model_types=[{"id": "t-type", "name": "T", **bag("configuration", type_cfg)}],
        models=[{"id": "t-model", "model_type": "t-type", **bag("configuration", model_cfg)}],
        vendors=[{"id": "t-vendor", "name": "TV", "wire": "openai_chat", **bag("model_defaults", vendor_cfg)}],
        model_vendors=[
            {"model": "t-model", "vendor": "t-vendor", "role": "inference_provider", "priority": 5,
             "api_name": "vendor/t-model", **bag("configuration", row_cfg)},
            {"model": "t-model", "vendor": "t-vendor", "role": "model_developer", "priority": 0,
             **bag("configuration", developer_cfg)},
        ],
    )  # fmt: skip
    return d


def load(*dirs: Path) -> Catalog:
    return Catalog.load(extra_dirs=dirs, env=False)


# --- the cascade ----------------------------------------------------------------------------------------------


def test_vendor_defaults_beat_model_and_type(tmp_path: Path) -> None:
    d = cascade_dir(
        tmp_path,
        type_cfg=llm(prefix_prompt_cache=False),
        model_cfg=llm(prefix_prompt_cache=False, supports_native_tools=True),
        vendor_cfg=llm(prefix_prompt_cache=True),
    )
    r = load(d).resolve("t-model", "t-vendor")
    assert r.prefix_prompt_cache is True
    src = r.source("llm", "prefix_prompt_cache")
    assert src is not None and src.layer == "vendor t-vendor model_defaults"
    assert src.pointer == "/vendors/0/model_defaults/llm/prefix_prompt_cache"


def test_inference_row_beats_vendor_and_unrelated_keys_survive(tmp_path: Path) -> None:
    d = cascade_dir(
        tmp_path,
        type_cfg=llm(prefix_prompt_cache=False),
        model_cfg=llm(prefix_prompt_cache=False, supports_native_tools=True),
        vendor_cfg=llm(prefix_prompt_cache=True, cache_kind="prefix"),
        row_cfg=llm(prefix_prompt_cache=False),
    )
    r = load(d).resolve("t-model", "t-vendor")
    assert r.prefix_prompt_cache is False
    assert r.supports_native_tools is True  # the model's unrelated key
    assert r.cache_kind == "prefix"  # the vendor's unrelated key
    assert r.source("llm", "prefix_prompt_cache").layer == "model-vendor t-model@t-vendor"  # type: ignore[union-attr]


def test_developer_row_is_ignored(tmp_path: Path) -> None:
    d = cascade_dir(
        tmp_path,
        vendor_cfg=llm(prefix_prompt_cache=False),
        developer_cfg=llm(prefix_prompt_cache=True, context_window=7),
    )
    r = load(d).resolve("t-model", "t-vendor")
    assert r.prefix_prompt_cache is False
    assert r.context_window is None
    assert all(
        "model_developer" not in s.layer and s.pointer.find("/model_vendors/1") < 0 for s in r.provenance.values()
    )


def test_no_vendor_means_model_then_type_answer(tmp_path: Path) -> None:
    d = cascade_dir(
        tmp_path,
        type_cfg=llm(prefix_prompt_cache=True, cache_min_tokens=10),
        model_cfg=llm(cache_min_tokens=20),
        vendor_cfg=llm(prefix_prompt_cache=False, cache_min_tokens=30),
    )
    r = load(d).resolve("t-model")
    assert r.vendor is None and r.api_name is None
    assert r.prefix_prompt_cache is True  # from the type: the vendor layer is absent
    assert r.cache_min_tokens == 20  # the model beats the type
    assert r.layers == ("model type t-type", "model t-model")


def test_explicit_null_replaces_and_absent_inherits(tmp_path: Path) -> None:
    d = cascade_dir(
        tmp_path,
        model_cfg={
            "llm": {"prefix_prompt_cache": True, "cache_min_tokens": 1024},
            "pricing": {"input": 1, "output": 2},
        },
        vendor_cfg=llm(prefix_prompt_cache=None),
        row_cfg={"pricing": {"input": None}},
    )
    r = load(d).resolve("t-model", "t-vendor")
    assert r.config["llm"] == {"prefix_prompt_cache": None, "cache_min_tokens": 1024}
    assert r.prefix_prompt_cache is False
    assert r.source("llm", "prefix_prompt_cache").layer == "vendor t-vendor model_defaults"  # type: ignore[union-attr]
    assert r.config["pricing"] == {"input": None, "output": 2}
    assert r.pricing is None  # no input price any more


def test_merge_semantics_objects_arrays_null_and_no_aliasing() -> None:
    a = {"llm": {"x": 1, "tags": [1, 2], "deep": {"k": 1}}, "keep": True}
    b = {"llm": {"tags": [3], "deep": {"j": 2}, "x": None}}
    c = {"llm": {"deep": None}}
    before = copy.deepcopy((a, b, c))
    merged = merge_configs(a, None, b)
    assert merged == {"llm": {"x": None, "tags": [3], "deep": {"k": 1, "j": 2}}, "keep": True}
    assert merge_configs(a, b, c) == {"llm": {"x": None, "tags": [3], "deep": None}, "keep": True}
    assert merged is not None
    merged["llm"]["tags"].append(99)
    merged["llm"]["deep"]["k"] = 42
    assert (a, b, c) == before  # inputs neither mutated nor aliased
    assert merge_configs(None, None) is None
    assert merge_configs({"x": {"y": 1}}, {"x": 5}, {"x": {"z": 2}}) == {"x": {"z": 2}}


def test_object_layer_replacing_a_scalar_moves_provenance() -> None:
    from segue.catalog.cascade import _cascade

    s1, s2, s3 = (Source(file="f", pointer=f"/{i}", layer=f"l{i}") for i in range(3))
    config, prov = _cascade([({"a": 1}, s1), ({"a": {"b": 2, "c": 3}}, s2), ({"a": {"b": None}}, s3)])
    assert config == {"a": {"b": None, "c": 3}}
    assert set(prov) == {("a", "b"), ("a", "c")}
    assert prov[("a", "b")].pointer == "/2/a/b" and prov[("a", "c")].pointer == "/1/a/c"


def test_only_a_literal_true_enables_prefix_cache() -> None:
    def resolved(value: Any) -> Resolved:
        return Resolved(
            model="m", vendor=None, api_name=None, wire=None, priority=None, layers=(),
            config={"llm": {"prefix_prompt_cache": value}}, provenance={},
        )  # fmt: skip

    assert resolved(True).prefix_prompt_cache is True
    for value in ("yes", "true", 1, None, {"on": True}):
        assert resolved(value).prefix_prompt_cache is False


def test_resolved_config_cannot_change_the_catalog() -> None:
    cat = load()
    r = cat.resolve("gpt-4.1-mini", "openai")
    r.config["llm"]["prefix_prompt_cache"] = False
    r.get("llm")["cache_min_tokens"] = 1
    again = cat.resolve("gpt-4.1-mini", "openai")
    assert again is r  # resolved once at load: lookups are dict reads
    assert again.prefix_prompt_cache is True and again.cache_min_tokens == 1024
    with pytest.raises(TypeError):
        r.provenance[("x",)] = Source(file="f", pointer="", layer="")  # type: ignore[index]


# --- layering and the environment -----------------------------------------------------------------------------


def test_later_directories_replace_rows_whole(tmp_path: Path) -> None:
    vendors = json.loads((packaged_catalog_dir() / "vendors.json").read_text())
    openai = next(v for v in vendors["vendors"] if v["id"] == "openai")
    openai["model_defaults"]["llm"]["prefix_prompt_cache"] = False
    write(tmp_path / "app", "vendors.json", vendors=[openai])
    r = load(tmp_path / "app").resolve("gpt-4.1-mini", "openai")
    assert r.prefix_prompt_cache is False
    src = r.source("llm", "prefix_prompt_cache")
    assert src is not None and src.file.endswith("app/vendors.json") and src.pointer.startswith("/vendors/0/")
    assert load().resolve("gpt-4.1-mini", "openai").prefix_prompt_cache is True


def test_env_path_layers_and_env_false_ignores_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = cascade_dir(tmp_path, vendor_cfg=llm(prefix_prompt_cache=True))
    monkeypatch.setenv("SEGUE_CATALOG_PATH", f"{os.pathsep}{d}{os.pathsep}")  # empty entries are skipped
    assert Catalog.load().resolve("t-model", "t-vendor").prefix_prompt_cache is True
    without = Catalog.load(env=False)
    assert without.find_model("t-model") is None
    with pytest.raises(CatalogLookupError, match="unknown vendor 't-vendor'"):
        without.resolve("t-model", "t-vendor")


# --- bad input ---------------------------------------------------------------------------------------------------


def only_error(d: Path) -> CatalogError:
    with pytest.raises(CatalogError) as info:
        load(d)
    return info.value


def test_typo_key_names_the_key_and_the_object(tmp_path: Path) -> None:
    write(
        tmp_path / "app", "x.json", vendors=[{"id": "v", "name": "V", "model_defaults": llm(prefix_promt_cache=True)}]
    )
    err = only_error(tmp_path / "app")
    assert err.file is not None and err.file.endswith("app/x.json")
    assert err.pointer == "/vendors/0/model_defaults/llm"
    assert "'prefix_promt_cache'" in str(err) and "did you mean 'prefix_prompt_cache'" in str(err)
    assert "prefix_prompt_cache" in err.expected
    assert str(err).startswith(f"{err.file}#/vendors/0/model_defaults/llm: unknown key")


def test_wrong_type_says_what_was_expected(tmp_path: Path) -> None:
    write(tmp_path / "app", "x.json", model_vendors=[
        {"model": "gpt-4.1-mini", "vendor": "openai", "role": "inference_provider", "priority": "high"}])  # fmt: skip
    err = only_error(tmp_path / "app")
    assert err.pointer == "/model_vendors/0/priority"
    assert err.expected == "an integer"
    assert str(err).endswith("#/model_vendors/0/priority: expected an integer, got 'high'")


def test_string_yes_is_a_schema_error(tmp_path: Path) -> None:
    write(
        tmp_path / "app", "x.json", vendors=[{"id": "v", "name": "V", "model_defaults": llm(prefix_prompt_cache="yes")}]
    )
    err = only_error(tmp_path / "app")
    assert err.pointer == "/vendors/0/model_defaults/llm/prefix_prompt_cache"
    assert err.expected == "a boolean or a null"


def test_unknown_version_is_refused_naming_known_versions(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "x.json").write_text(json.dumps({"$schema": SCHEMA_REF, "version": 7, "models": []}))
    err = only_error(tmp_path / "app")
    assert err.pointer == "/version"
    assert "1, 2" in err.expected and "got 7" in str(err) and "newer segue" in str(err)


def test_missing_model_in_a_model_vendor_row(tmp_path: Path) -> None:
    write(tmp_path / "app", "x.json", model_vendors=[
        {"model": "gpt-4.1-mimi", "vendor": "openai", "role": "inference_provider", "priority": 1}])  # fmt: skip
    err = only_error(tmp_path / "app")
    assert err.pointer == "/model_vendors/0/model"
    assert err.expected == "an existing model id"
    assert "got 'gpt-4.1-mimi'" in str(err) and "did you mean 'gpt-4.1-mini'" in str(err)


def test_missing_model_type_message_shape(tmp_path: Path) -> None:
    write(tmp_path / "app", "x.json", models=[{"id": "m1", "model_type": "lm"}])
    err = only_error(tmp_path / "app")
    assert str(err).startswith(f"{err.file}#/models/0/model_type: expected an existing model type id, got 'lm'")


def test_invalid_json_and_duplicate_ids(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.json").write_text('{"version": 1,\n "models": [}')
    err = only_error(tmp_path / "bad")
    assert err.expected == "valid JSON" and "line 2" in str(err)
    write(tmp_path / "dup", "a.json", models=[{"id": "m1", "model_type": "llm"}])
    write(tmp_path / "dup", "b.json", models=[{"id": "m1", "model_type": "llm"}])
    err = only_error(tmp_path / "dup")
    assert err.file is not None and err.file.endswith("dup/b.json") and err.pointer == "/models/0"
    assert "also at" in str(err) and "dup/a.json#/models/0" in str(err)


def test_check_dir_collects_every_problem(tmp_path: Path) -> None:
    d = tmp_path / "app"
    write(d, "a.json", models=[{"id": "m1", "model_type": "lm"}])
    write(d, "b.json", vendors=[{"id": "v", "name": "V", "wire": "grpc"}])
    (d / "c.json").write_text(json.dumps({"$schema": SCHEMA_REF, "version": 3}))
    errors = check_dir(d)
    assert [(Path(e.file or "").name, e.pointer) for e in errors] == [
        ("b.json", "/vendors/0/wire"),
        ("c.json", "/version"),
        ("a.json", "/models/0/model_type"),
    ]
    with pytest.raises(CatalogError) as info:
        load(d)
    assert len(info.value.more) == 2 and "2 more problem" in str(info.value)
    assert check_dir(tmp_path / "nowhere")[0].expected == "a catalog directory"
    (tmp_path / "empty").mkdir()
    assert check_dir(tmp_path / "empty")[0].expected == "at least one *.json catalog file"


def test_a_migration_is_one_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def v2_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
        for model in doc.get("models", []):
            model["notes"] = "migrated from version 2: " + model.get("notes", "")
        return doc

    monkeypatch.setattr(catalog_mod, "CURRENT_VERSION", 3)
    monkeypatch.setitem(catalog_mod.MIGRATIONS, 2, v2_to_v3)
    assert catalog_mod.known_versions() == [1, 2, 3]
    d = tmp_path / "app"
    d.mkdir()
    (d / "v3.json").write_text(json.dumps({"$schema": SCHEMA_REF, "version": 3, "models": [
        {"id": "m3", "model_type": "llm", "notes": "native"}]}))  # fmt: skip
    cat = load(d)
    assert (cat.model("gpt-4.1-mini").notes or "").startswith("migrated from version 2: Exact-prefix cache")
    assert cat.model("m3").notes == "native"


# --- lookups and pricing -------------------------------------------------------------------------------------------


def test_model_for_accepts_api_names_and_suggests_close_ids() -> None:
    cat = load()
    assert cat.model_for("claude-sonnet-4-6") == "claude-sonnet-4-6"
    assert cat.model_for("anthropic/claude-sonnet-4.6") == "claude-sonnet-4-6"
    assert cat.model_for("anthropic/claude-sonnet-4.6", "openrouter") == "claude-sonnet-4-6"
    assert cat.resolve("meta-llama/Llama-3.3-70B-Instruct", "vllm").model == "llama-3.3-70b-instruct"
    with pytest.raises(KeyError) as info:
        cat.model_for("claude-sonet-4-6")
    assert isinstance(info.value, CatalogLookupError)
    assert "unknown model 'claude-sonet-4-6'" in str(info.value) and "'claude-sonnet-4-6'" in str(info.value)
    with pytest.raises(CatalogLookupError, match="unknown vendor 'opnai'; did you mean 'openai'"):
        cat.resolve("gpt-4.1-mini", "opnai")
    # A listed model at a vendor with no row for it: the model's own layers and that vendor's defaults.
    elsewhere = cat.resolve("gpt-4.1-mini", "anthropic")
    assert elsewhere.note == (
        "no model-vendor row serves gpt-4.1-mini at anthropic: from the model's and the vendor's defaults "
        "(its inference providers: openai, openrouter)"
    )
    assert elsewhere.layers == ("model type llm", "model gpt-4.1-mini", "vendor anthropic model_defaults")
    assert (elsewhere.cache_kind, elsewhere.wire) == ("block", "anthropic")


def test_inference_vendors_by_priority_and_vendor_rows() -> None:
    cat = load()
    rows = cat.inference_vendors("claude-sonnet-4-6")
    assert [r.vendor for r in rows] == ["anthropic", "openrouter"]
    assert all(r.role == "inference_provider" for r in rows)
    assert cat.vendor("openai").wire == "openai_responses"
    assert cat.vendor("openrouter").wire == "openrouter"
    with pytest.raises(CatalogLookupError, match="did you mean 'anthropic'"):
        cat.vendor("antropic")


def test_cost_counts_each_part_of_the_prompt_once() -> None:
    cat = load()
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read_tokens=500_000,
        cache_write_tokens=200_000,
        cache_write_tokens_by_ttl={"5m": 150_000, "1h": 50_000},
    )
    # 300k uncached * 3 + 500k read * 0.3 + 150k 5m-writes * 3.75 + 50k 1h-writes * 6 + 100k out * 15
    assert cat.cost(usage, "claude-sonnet-4-6", "anthropic") == pytest.approx(0.9 + 0.15 + 0.5625 + 0.3 + 1.5)
    plain = Usage(input_tokens=2_000_000, output_tokens=0)  # missing cache fields count as 0
    assert cat.cost(plain, "gpt-4.1-mini", "openai") == pytest.approx(0.8)
    assert cat.cost(plain, "llama-3.3-70b-instruct", "vllm") == 0
    # an absent price is unknown, never the input price: reads on Cerebras have no known price
    p = cat.resolve("gpt-oss-120b", "cerebras").pricing
    assert p is not None and p.cache_read is None
    with pytest.raises(CatalogLookupError, match=r"needs pricing\.cache_read"):
        cat.cost(Usage(input_tokens=10, output_tokens=0, cache_read_tokens=5), "gpt-oss-120b", "cerebras")
    with pytest.raises(ValueError, match="exceed input_tokens"):
        cat.cost(Usage(input_tokens=10, output_tokens=0, cache_read_tokens=20), "gpt-4.1-mini", "openai")
    with pytest.raises(CatalogLookupError, match="no cost for gpt-oss-120b"):
        cat.cost(plain, "gpt-oss-120b")


def test_explain_names_file_pointer_and_layer_for_every_key() -> None:
    cat = load()
    keys = {".".join(k.path): k for k in cat.explain("claude-haiku-4-5", "anthropic")}
    assert keys["llm.cache_min_tokens"].value == 4096
    assert keys["llm.cache_min_tokens"].layer == "model claude-haiku-4-5"
    assert keys["llm.cache_max_breakpoints"].file.endswith("vendors.json")
    text = cat.explain_text("claude-haiku-4-5", "anthropic")
    assert text.splitlines()[0].startswith("claude-haiku-4-5@anthropic  (api_name claude-haiku-4-5, wire anthropic")
    line = next(ln for ln in text.splitlines() if ln.startswith("llm.prefix_prompt_cache"))
    assert "false" in line and "vendor anthropic model_defaults" in line and "#/vendors/0/model_defaults/llm/" in line


# --- the packaged catalog -------------------------------------------------------------------------------------------


def test_every_packaged_file_validates_and_names_its_schema() -> None:
    files = sorted(packaged_catalog_dir().glob("*.json"))
    assert {f.name for f in files} >= {"model_types.json", "models.json", "vendors.json", "model_vendors.json",
                                       "left_out.json"}  # fmt: skip
    validator = catalog_mod._validator()
    for f in files:
        doc = json.loads(f.read_text())
        assert doc["$schema"] == SCHEMA_REF and (f.parent / doc["$schema"]).resolve().is_file()
        assert doc["version"] == catalog_mod.CURRENT_VERSION
        assert list(validator.iter_errors(doc)) == [], f.name
    assert check_dir(packaged_catalog_dir()) == []


def test_every_shipped_serving_path_resolves() -> None:
    cat = load()
    paths = cat.serving_paths()
    required = {"claude-sonnet-4-6", "claude-opus-4-8", "claude-haiku-4-5", "gpt-5.6-terra", "gpt-4.1-mini",
                "gpt-oss-120b", "gemini-3-flash", "llama-3.3-70b-instruct"}  # fmt: skip
    assert required <= {m for m, _ in paths}
    for model, vendor in paths:
        r = cat.resolve(model, vendor)
        assert r.model == model and r.vendor == vendor
        if vendor is None:
            continue
        assert r.wire in ("anthropic", "openai_responses", "openai_chat", "openrouter")
        assert r.note is None, (model, vendor)  # a listed path: every layer of the cascade is there
        assert r.cache_kind in ("block", "prefix", "breakpoint"), (model, vendor)
        if r.prefix_prompt_cache:  # only an exact-prefix cache rewards appendOnly
            assert r.cache_kind == "prefix", (model, vendor)
        if r.cache_kind == "block":
            assert (r.cache_max_breakpoints, r.cache_lookback_blocks, r.cache_ttls) == (4, 20, ["5m", "1h"])
        if r.cache_kind == "breakpoint":
            assert not r.prefix_prompt_cache, (model, vendor)
            assert (r.cache_max_breakpoints, r.cache_match_breakpoints, r.cache_ttls) == (4, 80, ["30m", "12h"])
    assert {v for _, v in paths} >= {"anthropic", "openai", "openrouter", "cerebras", "gemini", "vllm", "llamacpp"}
    sonnet = cat.resolve("claude-sonnet-4-6", "anthropic")
    assert sonnet.pricing is not None
    assert sonnet.pricing.cache_write["5m"] == pytest.approx(1.25 * sonnet.pricing.input)
    assert sonnet.pricing.cache_write["1h"] == pytest.approx(2 * sonnet.pricing.input)
    assert sonnet.pricing.cache_read == pytest.approx(0.1 * sonnet.pricing.input)
    assert (sonnet.cache_min_tokens, cat.resolve("claude-haiku-4-5", "anthropic").cache_min_tokens) == (1024, 4096)
    mini = cat.resolve("gpt-4.1-mini", "openai")
    assert (mini.prefix_prompt_cache, mini.cache_min_tokens, mini.cache_increment_tokens) == (True, 1024, 128)
    assert cat.resolve("anthropic/claude-opus-4.8", "openrouter").prefix_prompt_cache is False
    assert cat.resolve("openai/gpt-4.1-mini", "openrouter").prefix_prompt_cache is True


def test_gemini_and_cerebras_follow_seed_004() -> None:
    """Seed 004 names Gemini and Cerebras as block or sliding caches that are happiest when the fragment is
    replaced; no twin measurement says otherwise (docs/layout.md), so `auto` must pick replace there."""
    cat = load()
    for model, vendor in (("gemini-3-flash", "gemini"), ("gpt-oss-120b", "cerebras")):
        r = cat.resolve(model, vendor)
        assert r.prefix_prompt_cache is False
        assert r.source("llm", "prefix_prompt_cache").layer == f"vendor {vendor} model_defaults"  # type: ignore[union-attr]
        assert "seed 004" in (cat.vendor(vendor).notes or "")


def test_an_api_name_shared_by_two_models_needs_the_vendor(tmp_path: Path) -> None:
    write(
        tmp_path / "app",
        "rows.json",
        models=[{"id": "m-a", "model_type": "llm"}, {"id": "m-b", "model_type": "llm"}],
        model_vendors=[
            {"model": "m-a", "vendor": "vllm", "role": "inference_provider", "priority": 1, "api_name": "shared"},
            {"model": "m-b", "vendor": "llamacpp", "role": "inference_provider", "priority": 1, "api_name": "shared"},
        ],
    )
    cat = load(tmp_path / "app")
    with pytest.raises(CatalogLookupError, match=r"names several models \(m-a, m-b\); pass vendor="):
        cat.model_for("shared")
    assert (cat.model_for("shared", "vllm"), cat.model_for("shared", "llamacpp")) == ("m-a", "m-b")
    assert cat.resolve("shared", "llamacpp").prefix_prompt_cache is True  # the local vendor's defaults


def test_the_catalogs_doc_example_prints_what_its_comments_say(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/catalogs.md's Python examples run, and each print matches the value its comment shows."""
    text = (Path(__file__).parents[2] / "docs" / "catalogs.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in text.split("```")[1::2] if b.startswith("python\n")]
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/catalogs.md", "exec"), {})
        printed = capsys.readouterr().out.splitlines()
        expected = [line.split("  # ", 1)[1] for line in block.splitlines() if line.startswith("print(")]
        assert len(printed) == len(expected)
        for out, comment in zip(printed, expected, strict=True):
            assert out and comment.startswith(out), (out, comment)
