"""Plugin: vendor wire modules, one per mapping file -> wire/<wire>.py and wire/__init__.py.

The mappings arrive checked (codegen/spec/wire/check.py). Each generated function is annotated with the vendor SDK's
TypedDicts (imported only under TYPE_CHECKING), so mypy --strict checks the shapes against the SDK too; the
function bodies come from codegen/plugins/wire/emit.py, this module assembles the module around them: which names it
defines and which it inherits from the wire it extends, its imports, constants and views.
"""

from __future__ import annotations

from codegen.emit import header, imports_by_module, render
from codegen.model import Model
from codegen.plugins.wire.emit import ModuleBuilder, typing_names
from codegen.spec import Spec
from codegen.spec.wire.rules import Mapping, Rule, rule_refs


def generate(spec: Spec, package: str) -> dict[str, str]:
    """Every wire module, keyed by its path in the generated package; {} when there are no mapping files."""
    if not spec.wires:
        return {}
    out = {f"wire/{m.wire}.py": _render_module(m, spec.model, package) for m in spec.wires.values()}
    out["wire/__init__.py"] = render(
        "wire_init.py.jinja",
        header=header(m.file for m in spec.wires.values()),
        package=package,
        wires=sorted(spec.wires),
    )
    return out


def _own(m: Mapping) -> dict[str, set[str]]:
    """Per section, the names this module defines: its own file's, and inherited ones that call one of those
    (an inherited function would otherwise call the parent's version of the replaced rule)."""
    sections = {
        "to_vendor": m.to_vendor,
        "dispatch": m.dispatch,
        "from_vendor": m.from_vendor,
        "parse_dispatch": m.parse_dispatch,
        "constants": m.constants,
    }
    own = {s: {n for n, r in rules.items() if m.parent is None or r.wire == m.wire} for s, rules in sections.items()}
    changed = True
    while changed:
        changed = False
        defined_to = own["to_vendor"] | own["dispatch"]
        defined_from = own["from_vendor"] | own["parse_dispatch"]
        for section, rules in sections.items():
            for name, rule in rules.items():
                if name in own[section]:
                    continue
                calls = _calls(section, rule)
                if calls & (defined_to if section in ("to_vendor", "dispatch") else defined_from):
                    own[section].add(name)
                    changed = True
    return own


def _calls(section: str, rule: Rule) -> set[str]:
    if section in ("dispatch", "parse_dispatch"):
        return set(rule.spec)
    return rule_refs(rule.spec)


def _render_module(m: Mapping, model: Model, package: str) -> str:
    b = ModuleBuilder(m, model)
    own = _own(m)
    constants = [b.constant(r) for n, r in m.constants.items() if n in own["constants"]]
    to_fns = [b.to_fn(r) for n, r in m.to_vendor.items() if n in own["to_vendor"]]
    dispatches = [b.dispatch_fn(r) for n, r in m.dispatch.items() if n in own["dispatch"]]
    views = [b.view_class(r) for n, r in m.from_vendor.items() if n in own["from_vendor"] and "view" in r.spec]
    from_fns = [b.from_fn(r) for n, r in m.from_vendor.items() if n in own["from_vendor"]]
    parse_dispatches = [b.parse_dispatch_fn(r) for n, r in m.parse_dispatch.items() if n in own["parse_dispatch"]]
    envelopes = [b.envelope(r) for n, r in m.to_vendor.items() if n in own["to_vendor"] and "prompt" in r.spec]
    breakpoints = _breakpoint_keys(m, own["to_vendor"])
    inherited = _inherited_names(m, own)
    canonical_imports = imports_by_module(b.canonical, model.owner)
    sdk_imports: dict[str, list[str]] = {}
    for path, local in sorted(b.sdk.items()):
        module, _, name = path.rpartition(".")
        sdk_imports.setdefault(module, []).append(name if name == local else f"{name} as {local}")
    sources = [*m.chain, *(f for f in model.files if f.module in dict(canonical_imports))]
    defined = [
        *(c["name"] for c in constants),
        *(e[key] for e in envelopes for key in ("keys_name", "required_name", "extra_name", "prompt_name")),
        *(["BREAKPOINT_KEYS"] if breakpoints else []),
        *(v["name"] for v in views),
        *(f["name"] for f in to_fns + dispatches + from_fns + parse_dispatches),
    ]
    return render(
        "wire.py.jinja",
        header=header(sources),
        package=package,
        m=m,
        description=m.file.raw["description"],
        abc_imports=sorted(b.abc),
        typing_imports=typing_names(b.typing, bool(sdk_imports)),
        uses_attrs=bool(views),
        canonical_imports=canonical_imports,
        sdk_imports=sorted(sdk_imports.items()),
        helpers=sorted(b.helpers),
        inherited=sorted(inherited),
        constants=constants,
        envelopes=envelopes,
        breakpoints=breakpoints,
        views=views,
        to_fns=to_fns,
        dispatches=dispatches,
        from_fns=from_fns,
        parse_dispatches=parse_dispatches,
        exported=sorted([*defined, *inherited]),
    )


def _inherited_names(m: Mapping, own: dict[str, set[str]]) -> set[str]:
    """What the module imports from the wire it extends: every name it has but does not define."""
    if m.parent is None:
        return set()
    names: set[str] = set()
    for n in set(m.to_vendor) - own["to_vendor"]:
        names.add(n)
        names |= _envelope_names(m.to_vendor[n])
    names |= set(m.dispatch) - own["dispatch"]
    for n in set(m.from_vendor) - own["from_vendor"]:
        names.add(f"parse_{n}")
        if "view" in m.from_vendor[n].spec:
            names.add(m.from_vendor[n].spec["view"])
    names |= {f"parse_{n}" for n in set(m.parse_dispatch) - own["parse_dispatch"]}
    names |= set(m.constants) - own["constants"]
    if not _breakpoint_keys(m, own["to_vendor"]) and _breakpoint_keys(m, set(m.to_vendor)):
        names.add("BREAKPOINT_KEYS")
    return names


def _breakpoint_keys(m: Mapping, names: set[str]) -> list[str]:
    """The keys of the breakpoint markers, when one of the rules `names` sets one (all the wire's, then)."""
    if not any(m.to_vendor[n].spec.get("sets", {}).get("breakpoint") for n in names):
        return []
    return sorted({r.spec["sets"]["key"] for r in m.to_vendor.values() if r.spec.get("sets", {}).get("breakpoint")})


def _envelope_names(rule: Rule) -> set[str]:
    if "prompt" not in rule.spec:
        return set()
    upper = rule.name.upper()
    return {f"{upper}_KEYS", f"{upper}_REQUIRED", f"{upper}_EXTRA", f"{upper}_PROMPT"}
