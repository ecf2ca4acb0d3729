"""The GitHub workflow is valid (checked offline against check-jsonschema's vendored schema) and
runs what the README promises."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def test_workflows_match_the_github_schema():
    assert WORKFLOWS, "no workflow in .github/workflows"
    exe = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run([str(exe), "--builtin-schema", "vendor.github-workflows", *map(str, WORKFLOWS)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cpu_job_runs_make_test_and_gpu_job_uses_the_gpu_profile():
    text = (ROOT / ".github" / "workflows" / "course.yml").read_text()
    assert "run: make test" in text
    assert "[self-hosted, linux, x64, gpu]" in text and "COURSE_PROFILE: gpu" in text
    assert "--nbval-lax" in text and "upload-artifact" in text


def test_ci_script_calls_make_test():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "make test" in lines
