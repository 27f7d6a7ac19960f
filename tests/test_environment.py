"""The pip pins and the conda environment describe the same course environment."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(lines) -> dict[str, str]:
    pins = {}
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith(("#", "-")):
            continue
        match = PIN.match(line)
        assert match, f"not an exact pin: {line!r}"
        pins[_normalise(match[1])] = match[2]
    return pins


def requirement_pins() -> dict[str, str]:
    return _pins((ROOT / "requirements.txt").read_text().splitlines())


def conda_pip_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [item["pip"] for item in env["dependencies"] if isinstance(item, dict) and "pip" in item]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip: section"
    return _pins(pip_sections[0])


def test_environment_yml_pins_the_same_packages_as_requirements():
    pip, conda = requirement_pins(), conda_pip_pins()
    only_pip = sorted(set(pip) - set(conda))
    only_conda = sorted(set(conda) - set(pip))
    differ = sorted(f"{name}: requirements.txt {pip[name]} vs environment.yml {conda[name]}"
                    for name in set(pip) & set(conda) if pip[name] != conda[name])
    assert not (only_pip or only_conda or differ), (
        f"environment.yml and requirements.txt drifted apart.\n"
        f"only in requirements.txt: {only_pip}\nonly in environment.yml: {only_conda}\ndifferent: {differ}"
    )


def test_environment_yml_python_matches_the_project():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pythons = [dep for dep in env["dependencies"] if isinstance(dep, str) and dep.startswith("python")]
    assert pythons == ["python=3.11"]


def test_torch_is_pinned_to_the_cpu_release_on_disk():
    # An unpinned torch downloads a multi-GB CUDA build.
    assert requirement_pins()["torch"] == "2.13.0"
    assert conda_pip_pins()["torch"] == "2.13.0"


def test_every_declared_dependency_is_pinned():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared += extra
    names = {_normalise(re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0]) for dep in declared}
    missing = sorted(names - set(requirement_pins()))
    assert not missing, f"declared in pyproject.toml but not pinned in requirements.txt: {missing}"
