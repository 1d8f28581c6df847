"""What the tests share, imported as a package: `from tests._support.<module> import ...`.

A helper two test modules need lives here, never in a test module another test imports.
"""
