"""Shared test helpers. Tests never touch the network."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def require_tool(name: str, why: str) -> str:
    """Path of an external tool; skipped locally when missing, but a failure in CI (CI=true) so CI never skips."""
    local = REPO / "node_modules" / ".bin" / name
    found = str(local) if local.exists() else shutil.which(name)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required in CI ({why}); .ci/run must install it")
    pytest.skip(f"{name} not installed ({why}); .ci/run installs it")


@pytest.fixture
def repo() -> Path:
    return REPO
