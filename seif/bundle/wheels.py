"""The wheels of a Runtime bundle: this project and every runtime dependency, hash-pinned.

The project wheel is built with ``pip wheel --no-deps`` from a copy of the source (its
``pyproject.toml``, README and the packages it lists), so the repository is never written to.
The dependencies are the ``[project] dependencies`` and the ``server`` extra of that
``pyproject.toml`` (never the other extras), resolved by ``pip wheel`` under a constraints file
that pins every distribution of the running environment to its installed version: the bundle
carries the versions the tests ran with. pip reuses its cache; it needs a package index only for
what the cache lacks.
``requirements.txt`` lists every wheel with its SHA-256 for ``pip install --require-hashes``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import seif

PIP_TIMEOUT_S = 900
REQUIREMENTS = "requirements.txt"


class BundleError(Exception):
    """A bundle refusal with a stable code; ``usage`` selects exit 2 over exit 1."""

    def __init__(self, code: str, message: str, *, usage: bool = True) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.usage = usage


def source_root(given: str | None) -> Path:
    """The project source: ``given``, else the checkout this package is imported from."""
    root = Path(given) if given else Path(seif.__file__).resolve().parent.parent
    if not (root / "pyproject.toml").is_file():
        message = f"no `pyproject.toml` in `{root}`; pass the project source with `--source DIR`"
        raise BundleError("SOURCE_NOT_FOUND", message)
    return root


def _pyproject(root: Path) -> dict[str, Any]:
    try:
        with (root / "pyproject.toml").open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BundleError("SOURCE_NOT_FOUND", f"cannot read `pyproject.toml`: {exc}") from None


def runtime_requirements(root: Path) -> list[str]:
    """What the runtime needs of the source's ``pyproject.toml``: its ``[project]
    dependencies`` and its ``server`` extra (the other extras are not the runtime's)."""
    project = _pyproject(root).get("project", {})
    deps = project.get("dependencies", [])
    server = project.get("optional-dependencies", {}).get("server", [])
    return [str(d) for d in (*deps, *server)]


def _pip(*argv: str) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *argv]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise BundleError("WHEELS_FAILED", f"`pip {argv[0]}` took over {PIP_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-6:])
        raise BundleError("WHEELS_FAILED", f"`pip {argv[0]}` failed: {tail}")


def project_wheel(root: Path, dest: Path) -> None:
    """``pip wheel --no-deps`` of a copy of the source holding only what the wheel is made of."""
    config = _pyproject(root)
    packages = config.get("tool", {}).get("setuptools", {}).get("packages", [])
    readme = config.get("project", {}).get("readme")
    with tempfile.TemporaryDirectory(prefix="seif-wheel-") as tmp:
        copy = Path(tmp) / "source"
        copy.mkdir()
        shutil.copy2(root / "pyproject.toml", copy)
        if isinstance(readme, str) and (root / readme).is_file():
            shutil.copy2(root / readme, copy / readme)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.orig")
        for package in dict.fromkeys(p.split(".")[0] for p in packages):  # top-level folders
            shutil.copytree(root / package, copy / package, ignore=ignore)
        _pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(dest), str(copy))


def _constraints(path: Path) -> None:
    """Pin every installed distribution (but this project) to its installed version."""
    pins = sorted(
        {
            f"{d.metadata['Name']}=={d.version}"
            for d in importlib.metadata.distributions()
            if d.metadata["Name"] and d.metadata["Name"].lower() != "seif"
        }
    )
    path.write_text("\n".join(pins) + "\n", encoding="utf-8")


def dependency_wheels(requirements: list[str], dest: Path) -> None:
    if not requirements:
        return
    with tempfile.TemporaryDirectory(prefix="seif-wheel-") as tmp:
        constraints = Path(tmp) / "constraints.txt"
        _constraints(constraints)
        _pip("wheel", "--quiet", "--wheel-dir", str(dest), "-c", str(constraints), *requirements)


def _name_and_version(wheel: Path) -> tuple[str, str]:
    """From ``{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl``."""
    parts = wheel.name.removesuffix(".whl").split("-")
    if len(parts) not in (5, 6):
        raise BundleError("WHEELS_FAILED", f"`{wheel.name}` is not a wheel file name", usage=False)
    return parts[0], parts[1]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def hashed_requirements(wheels: Path) -> list[dict[str, str]]:
    """Write ``wheels/requirements.txt`` (``name==version --hash=sha256:...`` per wheel) and
    return the wheels as ``{file, name, version, sha256}``."""
    rows = []
    for wheel in sorted(wheels.glob("*.whl")):
        name, version = _name_and_version(wheel)
        rows.append({"file": wheel.name, "name": name, "version": version, "sha256": sha256(wheel)})
    seen = [r["name"].lower().replace("_", "-").replace(".", "-") for r in rows]
    if len(set(seen)) != len(seen):
        raise BundleError("WHEELS_FAILED", "two wheels of one distribution", usage=False)
    lines = [f"{r['name']}=={r['version']} --hash=sha256:{r['sha256']}" for r in rows]
    (wheels / REQUIREMENTS).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


def build_wheels(root: Path, wheels: Path) -> list[dict[str, str]]:
    """Every wheel the bundle needs, in ``wheels``; returns them (see
    :func:`hashed_requirements`)."""
    wheels.mkdir(parents=True, exist_ok=True)
    project_wheel(root, wheels)
    dependency_wheels(runtime_requirements(root), wheels)
    rows = hashed_requirements(wheels)
    if not any(r["name"] == "seif" for r in rows):
        raise BundleError("WHEELS_FAILED", "no wheel of `seif` was built", usage=False)
    return rows
