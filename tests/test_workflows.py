"""The GitHub workflow is valid (checked offline against check-jsonschema's vendored GitHub-workflow
schema, and a broken copy of it is refused) and, read as data, runs what the README promises: make test
and nbgrader on every push, the site on every push and pull request (published from main only), the
GPU job on a self-hosted GPU runner that never runs a fork's code, with pins read from pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from ruamel.yaml import YAML  # check-jsonschema's own YAML reader (YAML 1.2: `on` is a string)

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
COURSE = ROOT / ".github" / "workflows" / "course.yml"


def validate(*paths: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("check-jsonschema")
    return subprocess.run([str(exe), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def workflow() -> dict:
    return YAML(typ="safe").load(COURSE.read_text())


def runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def uses(job: dict) -> list[str]:
    return [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]


def test_workflows_match_the_github_schema(tmp_path):
    assert WORKFLOWS, "no workflow in .github/workflows"
    result = validate(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yml"  # the validator really checks: a job without runs-on is refused
    broken.write_text(COURSE.read_text().replace("    runs-on: ubuntu-latest\n", "    runs_on: ubuntu-latest\n", 1))
    assert validate(broken).returncode != 0


def test_triggers_permissions_and_concurrency(workflow):
    assert set(workflow["on"]) == {"push", "pull_request", "workflow_dispatch"}
    assert workflow["permissions"] == {"contents": "read"}
    assert "github.ref" in workflow["concurrency"]["group"] and workflow["concurrency"]["cancel-in-progress"] is True


def test_cpu_job_runs_make_test_and_nbgrader_on_every_push(workflow):
    cpu = workflow["jobs"]["cpu"]
    assert "if" not in cpu and cpu["runs-on"] == "ubuntu-latest"
    assert "make test" in runs(cpu) and "make nbgrader-test" in runs(cpu)
    assert not any("--nbval-lax" in r for r in runs(cpu))
    setup = next(s for s in cpu["steps"] if s.get("uses", "").startswith("actions/setup-python"))
    assert setup["with"]["cache"] == "pip" and setup["with"]["cache-dependency-path"] == "pyproject.toml"


def test_pins_are_read_from_pyproject_not_repeated(workflow):
    text = COURSE.read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        assert requirement not in text, f"{requirement} is repeated in the workflow; read it with .ci/pin"
    torch_step = next(r for r in runs(workflow["jobs"]["cpu"]) if "download.pytorch.org/whl/cpu" in r)
    assert '"$(.ci/pin torch)"' in torch_step
    pin = subprocess.run([str(ROOT / ".ci" / "pin"), "torch", "jax"], capture_output=True, text=True, check=True)
    assert pin.stdout.split() == [r for r in project["dependencies"] if r.startswith(("torch==", "jax=="))]
    assert subprocess.run([str(ROOT / ".ci" / "pin"), "no-such-package"], capture_output=True).returncode != 0


def test_site_is_built_for_pull_requests_and_published_from_main(workflow):
    site, pages = workflow["jobs"]["site"], workflow["jobs"]["pages"]
    assert "if" not in site and "make site" in runs(site)  # every push and pull request
    assert "actions/upload-pages-artifact" in uses(site)
    assert pages["needs"] == "site" and uses(pages) == ["actions/deploy-pages"]
    assert pages["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    assert pages["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}


def test_gpu_job_uses_the_gpu_profile_and_never_runs_a_forks_code(workflow):
    gpu = workflow["jobs"]["gpu"]
    assert gpu["runs-on"] == ["self-hosted", "linux", "x64", "gpu"] and gpu["env"]["COURSE_PROFILE"] == "gpu"
    assert gpu["environment"] == "gpu"
    assert "github.event.pull_request.head.repo.full_name == github.repository" in gpu["if"]
    assert "contains(github.event.pull_request.labels.*.name, 'gpu')" in gpu["if"]
    assert any(r.startswith("make gpu-check") for r in runs(gpu))
    upload = next(s for s in gpu["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "gpu-check/"


def test_ci_script_calls_make_test():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "make test" in lines and "make nbgrader-test" in lines and "make browser-test" in lines
