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
    assert "make gpu-check" in text and "upload-artifact" in text and "--nbval-lax" not in text


def test_workflow_hygiene():
    """Read-only token, one run per ref, pip cache, a CPU build of torch in the CPU job, and a GPU
    job that never runs a fork's code because of a label."""
    text = (ROOT / ".github" / "workflows" / "course.yml").read_text()
    assert "permissions:\n  contents: read" in text
    assert "concurrency:" in text and "github.ref" in text
    assert "cache: pip" in text
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in text
    assert "github.event.pull_request.head.repo.full_name == github.repository" in text
    assert "environment: gpu" in text


def test_ci_script_calls_make_test():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "make test" in lines
