"""The exported TypeScript declarations compile under `tsc --strict` and type every valid fixture."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests._support.codegen_runner import codegen
from tests._support.environment import NODE_INSTALL, require_tool


def test_declarations_type_the_valid_fixtures(tmp_path: Path) -> None:
    tsc = require_tool("tsc", "TypeScript compiler for the exported declarations", NODE_INSTALL)
    bundle = tmp_path / "bundle"
    exported = codegen("--export", str(bundle))
    assert exported.returncode == 0, exported.stderr

    lines = ['import type * as segue from "./bundle/typescript/index";', ""]
    count = 0
    for type_dir in sorted((bundle / "fixtures").iterdir()):
        for f in sorted((type_dir / "valid").glob("*.json")):
            count += 1
            lines.append(f"export const f{count}: segue.{type_dir.name} = {f.read_text().strip()};")
    # An invalid value must be rejected too, or the check proves nothing.
    (tmp_path / "fixtures.ts").write_text("\n".join(lines) + "\n")
    (tmp_path / "bad.ts").write_text(
        'import type * as segue from "./bundle/typescript/index";\n'
        'export const bad: segue.TextBlock = { type: "text", text: 5 };\n'
    )
    config = {
        "compilerOptions": {
            "strict": True,
            "noEmit": True,
            "target": "ES2022",
            "module": "ES2022",
            "moduleResolution": "bundler",
            "skipLibCheck": False,
        },
        "files": ["fixtures.ts", "bad.ts"],
    }
    (tmp_path / "tsconfig.json").write_text(json.dumps(config))
    # One compiler run for both files (each run costs seconds): tsc reports every file's errors, so the fixtures
    # are clean exactly when every error it reports is in bad.ts, and bad.ts must have one.
    done = subprocess.run([tsc, "-p", str(tmp_path)], capture_output=True, text=True, check=False)
    errors = re.findall(r"^(\S+?)\(\d+,\d+\): error", done.stdout, re.MULTILINE)
    assert done.returncode != 0 and errors, done.stdout + done.stderr
    assert {Path(name).name for name in errors} == {"bad.ts"}, done.stdout + done.stderr
    assert count > 50
