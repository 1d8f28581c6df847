"""segue's code generator: JSON Schemas in schemas/ -> attrs classes, cattrs converter, wire serializers, TypeScript.

`codegen/driver.py` loads and checks every input once (codegen/spec/) and runs one plugin per output
(codegen/plugins/). Run `python -m codegen` to regenerate, `--check` to verify committed output, `--export DIR`
to write the bundle for clients in other languages. See docs/codegen.md.
"""
