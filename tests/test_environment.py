"""environment.yml (conda) and pyproject.toml (pip) pin the same packages at the same versions."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONDA_TO_PIP = {"pytorch": "torch"}  # conda-forge names that differ from PyPI's
NOT_PACKAGES = {"python", "pip"}


# The course's environment: what `make lab` and `make test` install. The other extras (instructor,
# site, browser) are maintainers' tools, pinned too but not part of the conda environment.
COURSE_EXTRAS = ("test",)


def pip_pins(extras=COURSE_EXTRAS) -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for extra in extras for r in project["optional-dependencies"][extra]]
    pins = {}
    for r in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([0-9][A-Za-z0-9.]*)", r)
        assert m, f"pyproject.toml: {r!r} is not pinned with =="
        pins[m[1].lower()] = m[2]
    return pins


def conda_pins() -> dict[str, str]:
    pins = {}
    text = (ROOT / "environment.yml").read_text()
    for line in text[text.index("\ndependencies:"):].splitlines():
        m = re.fullmatch(r"  - ([A-Za-z0-9_.\-]+)(?:=([0-9][A-Za-z0-9.]*))?", line)
        if m and m[1] not in NOT_PACKAGES:
            assert m[2], f"environment.yml: {m[1]} has no version pin"
            pins[CONDA_TO_PIP.get(m[1], m[1]).lower()] = m[2]
    return pins


def test_both_files_pin_the_same_versions():
    assert pip_pins() == conda_pins()


def test_every_extra_is_pinned():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(COURSE_EXTRAS) <= set(extras)
    pip_pins(tuple(extras))  # asserts an exact == pin for every requirement


def test_environment_installs_the_helpers_package():
    text = (ROOT / "environment.yml").read_text()
    assert "      - -e ." in text and "python=3.11" in text


def test_torch_is_pinned_to_the_version_the_outputs_were_made_with():
    import torch

    assert torch.__version__.split("+")[0] == pip_pins()["torch"]
