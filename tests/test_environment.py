"""environment.yml (conda) and pyproject.toml (pip, read by tools/pins.py) pin the same packages at the
same versions, every requirement is pinned, and the torch that runs is the pinned one."""

import re

from tools import layout, pins

CONDA_TO_PIP = {"pytorch": "torch"}  # conda-forge names that differ from PyPI's
NOT_PACKAGES = {"python", "pip"}
# The course's environment: what `make lab` and `make test` install. The other extras (site, browser)
# are maintainers' tools, pinned too but not part of the conda environment.
COURSE_EXTRAS = ("test",)


def conda_pins() -> dict[str, str]:
    found = {}
    text = (layout.ROOT / "environment.yml").read_text()
    for line in text[text.index("\ndependencies:"):].splitlines():
        m = re.fullmatch(r"  - ([A-Za-z0-9_.\-]+)(?:=([0-9][A-Za-z0-9.]*))?", line)
        if m and m[1] not in NOT_PACKAGES:
            assert m[2], f"environment.yml: {m[1]} has no version pin"
            found[CONDA_TO_PIP.get(m[1], m[1]).lower()] = m[2]
    return found


def test_both_files_pin_the_same_versions():
    assert pins.pins(COURSE_EXTRAS) == conda_pins()
    assert "      - -e ." in (layout.ROOT / "environment.yml").read_text()


def test_every_requirement_is_pinned_and_asking_for_another_is_an_error():
    assert pins.pins()  # raises for a requirement not pinned as name==version
    assert pins.main(["torch"]) == 0 and pins.main(["no-such-package"]) == 2


def test_torch_is_pinned_to_the_version_the_outputs_were_made_with():
    import torch

    assert torch.__version__.split("+")[0] == pins.pins()["torch"]
