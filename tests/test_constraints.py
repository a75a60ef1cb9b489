"""The install is part of the project: .ci/constraints.txt pins what pyproject.toml asks for, and
CI runs README's commands as written."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

packaging = pytest.importorskip("packaging", reason="needs the test extra (pip install -e '.[test]')")
from packaging.requirements import Requirement  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402
from packaging.version import Version  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"


def pins(text: str) -> dict[str, Version]:
    """``name==version`` lines of a constraints file; anything else but comments is an error."""
    found: dict[str, Version] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([0-9][0-9A-Za-z.+!-]*)", line)
        assert match, f"constraints line {number} is not name==version: {line!r}"
        name = canonicalize_name(match.group(1))
        assert name not in found, f"constraints line {number} pins {name} twice"
        found[name] = Version(match.group(2))
    return found


def requirements(pyproject: dict) -> dict[str, list[Requirement]]:
    """Every requirement of the project, by where it is declared (``dependencies`` or the extra)."""
    project = pyproject["project"]
    declared = {"dependencies": [Requirement(r) for r in project["dependencies"]]}
    for extra, listed in project["optional-dependencies"].items():
        declared[extra] = [Requirement(r) for r in listed]
    return declared


def unmet(declared: dict[str, list[Requirement]], pinned: dict[str, Version]) -> list[str]:
    problems = []
    for where, listed in declared.items():
        for requirement in listed:
            name = canonicalize_name(requirement.name)
            if name not in pinned:
                problems.append(f"{requirement} ({where}) is not pinned")
            elif not requirement.specifier.contains(pinned[name], prereleases=True):
                problems.append(f"{requirement} ({where}) excludes the pinned {name}=={pinned[name]}")
    return problems


def test_every_requirement_is_pinned_within_its_range():
    declared = requirements(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8")))
    assert unmet(declared, pins(CONSTRAINTS.read_text(encoding="utf-8"))) == []


def test_the_check_finds_a_missing_or_excluded_pin():
    declared = {"dependencies": [Requirement("numba>=0.68,<0.69")], "torch": [Requirement("torch>=2.13")]}
    assert unmet(declared, {"numba": Version("0.68.1"), "torch": Version("2.13.0")}) == []
    assert unmet(declared, {"numba": Version("0.69.0"), "torch": Version("2.13.0")}) == [
        "numba<0.69,>=0.68 (dependencies) excludes the pinned numba==0.69.0"]
    assert unmet(declared, {"numba": Version("0.68.1")}) == ["torch>=2.13 (torch) is not pinned"]


def test_pins_refuses_what_is_not_a_pin():
    assert pins("# comment\nNumPy==2.4.6\n\ntorch==2.13.0\n") == {"numpy": Version("2.4.6"),
                                                                 "torch": Version("2.13.0")}
    with pytest.raises(AssertionError, match="line 1 is not name==version"):
        pins("numpy>=2\n")
    with pytest.raises(AssertionError, match="pins numpy twice"):
        pins("numpy==2.4.6\nnumpy==2.4.5\n")


def test_torch_and_numba_cuda_agree_on_the_cuda_toolkit():
    """torch's Linux wheels pin cuda-toolkit 13.0.3 and numba-cuda[cu13] takes any 13.*: the pin
    must be one both accept, or a pip without backtracking fails to install the CUDA build."""
    pinned = pins(CONSTRAINTS.read_text(encoding="utf-8"))
    assert pinned["torch"] == Version("2.13.0")
    assert pinned["cuda-toolkit"].release[:3] == (13, 0, 3)


def readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [line for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines()
            if line.startswith("python3 -m venv")]


def test_ci_runs_readme_test_command_as_written():
    main, test = readme_commands()
    assert main.endswith("&& engine prepare") and "-c .ci/constraints.txt" in main
    assert test.endswith("&& python -m pytest tests -q") and "-c .ci/constraints.txt" in test
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line for line in ci if line.strip() and not line.startswith("#")]
    assert commands[-1] == test
    assert not any("pip install" in line for line in commands[:-1])  # nothing installed beside it
