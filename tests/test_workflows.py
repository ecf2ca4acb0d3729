"""The GitHub workflow is valid, checked offline against check-jsonschema's vendored GitHub-workflow
schema (and a broken copy of it is refused, so the check really checks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def validate(*paths: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("check-jsonschema")
    return subprocess.run([str(exe), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
                          capture_output=True, text=True)


def test_workflows_match_the_github_schema(tmp_path):
    assert WORKFLOWS, "no workflow in .github/workflows"
    result = validate(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yml"  # a job without runs-on is refused
    broken.write_text(WORKFLOWS[0].read_text().replace("    runs-on: ubuntu-latest\n", "    runs_on: ubuntu-latest\n", 1))
    assert validate(broken).returncode != 0
