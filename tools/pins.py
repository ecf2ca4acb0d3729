"""The one reader of the pinned requirements in pyproject.toml (standard library only: CI asks it
before any environment exists).

    python -m tools.pins torch jax      # torch==2.13.0 and jax==0.10.2, one a line
    python -m tools.pins --extra site   # the requirements of an extra
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

PROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
PIN = re.compile(r"([A-Za-z0-9_.\-]+)==([0-9][A-Za-z0-9.]*)")


def pins(extras: tuple[str, ...] | None = None) -> dict[str, str]:
    """name (lower case) -> version, of the dependencies and these extras (None: every extra);
    ValueError for a requirement not pinned as name==version."""
    optional = PROJECT["optional-dependencies"]
    found = {}
    for r in PROJECT["dependencies"] + [r for e in (optional if extras is None else extras) for r in optional[e]]:
        if not (m := PIN.fullmatch(r.strip())):
            raise ValueError(f"pyproject.toml: {r!r} is not pinned as name==version")
        found[m[1].lower()] = m[2]
    return found


def main(argv: list[str]) -> int:
    if argv[:1] == ["--extra"] and len(argv) == 2 and argv[1] in PROJECT["optional-dependencies"]:
        print("\n".join(PROJECT["optional-dependencies"][argv[1]]))
        return 0
    known = pins()
    if not argv or any(n.lower() not in known for n in argv):
        print(f"tools.pins: not pinned in pyproject.toml: {argv}\n{__doc__}", file=sys.stderr)
        return 2
    print("\n".join(f"{n}=={known[n.lower()]}" for n in argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
