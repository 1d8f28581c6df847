"""Codegen plugins, one per output. Each module has `generate(spec, package) -> {path: text}` (see codegen/driver.py).

Plugins import only the loaded spec and the shared helpers below them (codegen/emit.py, codegen/pytypes.py,
codegen/naming.py); never each other, never the driver.
"""
