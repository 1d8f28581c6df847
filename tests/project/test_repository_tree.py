"""The tracked tree holds source, schemas, data and docs only: no binary, no archive, no stray artifact.

Issue 25: a commit once added 27 third-party wheels (13 MB) to the repository root, where they shipped in every
sdist. Dependencies come from the package index and build output from a build; `.gitignore` keeps both out, and
this test fails on any tracked file that is one.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests._support.environment import REPO

#: What a tracked file may be, by suffix (a file without one is named in NAMES).
SUFFIXES = {
    ".py", ".pyi", ".md", ".json", ".jinja", ".ts", ".js", ".mjs", ".css", ".html", ".toml", ".sql", ".typed", ".txt",
}  # fmt: skip
NAMES = {".gitignore", "run", "llama-server.sh"}  # .ci/run, the CI script; .ci/llama-server.sh, the build it calls
#: Artifacts a build, a test run or a demo leaves behind; each must be ignored by .gitignore.
ARTIFACTS = [
    "x-1.0-py3-none-any.whl",
    "segue-0.1.0.tar.gz",
    "bundle.zip",
    "bundle.tgz",
    "segue.db",
    "runs.db-wal",
    "store.sqlite3",
    "sdk/segue/m.cpython-311-x86_64-linux-gnu.so",
    "sdk/segue/__pycache__/x.cpython-311.pyc",
    "dist/segue-0.1.0.tar.gz",
    "build/lib/segue/__init__.py",
    "pytest.log",
]
MAX_BYTES = 1_000_000


def tracked() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout (an sdist): nothing is tracked")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def test_every_tracked_file_is_text_of_a_known_kind() -> None:
    files = tracked()
    assert len(files) > 100, "git ls-files listed too little: the test reads the wrong tree"
    odd = []
    for name in files:
        path = REPO / name
        if not path.exists():  # deleted in the work tree, not yet committed
            continue
        suffix = path.suffix if path.suffix else None
        if (suffix not in SUFFIXES and path.name not in NAMES) or b"\0" in path.read_bytes()[:8192]:
            odd.append(name)
        elif path.stat().st_size > MAX_BYTES:
            odd.append(f"{name} ({path.stat().st_size} bytes)")
    assert odd == [], f"binaries, archives or stray artifacts are tracked: {odd}; `git rm` them"


def test_gitignore_keeps_build_and_run_artifacts_out() -> None:
    tracked()  # skips outside a checkout
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "--verbose", "--non-matching", *ARTIFACTS],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    not_ignored = [line.split("\t")[-1] for line in result.stdout.splitlines() if line.startswith("::")]
    assert not_ignored == [], f".gitignore lets these through: {not_ignored}"
    assert len(result.stdout.splitlines()) == len(ARTIFACTS)
