"""Plugin: the cattrs converter -> converter.py, listing every class and each tagged union's tag table.

The hooks themselves are hand-written (`segue._support.hooks.configure_converter`); the generated module only tells
them which classes and unions exist, so a new schema type needs no new hook.
"""

from __future__ import annotations

from codegen.emit import header, render
from codegen.spec import Spec


def generate(spec: Spec, package: str) -> dict[str, str]:
    model = spec.model
    return {
        "converter.py": render(
            "converter.py.jinja",
            header=header(model.files),
            package=package,
            files=model.files,
            owner=model.owner,
        )
    }
