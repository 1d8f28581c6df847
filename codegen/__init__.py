"""segue's code generator: JSON Schemas in schemas/ -> attrs classes, cattrs hooks, TypeScript declarations.

Run `python -m codegen` to regenerate, `--check` to verify committed output, `--export DIR` to write the
bundle for clients in other languages. See docs/codegen.md.
"""
