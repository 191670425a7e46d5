"""The package layout the wheel and the Runtime bundle are built from: every package folder is
declared (a subpackage left out of pyproject.toml would be missing from the bundle), and the
import-linter contracts that `make test` runs are the ones documented in the README."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = ("policy", "compiler", "servers", "seif", "grammar")


def _config() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_declared() -> None:
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in TOP
        for init in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    declared = set(_config()["tool"]["setuptools"]["packages"])  # type: ignore[index]
    assert found <= declared
    for data in declared - found:  # a folder of package data only (the approvers' page)
        folder = ROOT.joinpath(*data.split("."))
        assert folder.is_dir() and not list(folder.glob("*.py")), data


def test_the_layer_contracts_name_every_part_of_servers() -> None:
    contracts = _config()["tool"]["importlinter"]["contracts"]  # type: ignore[index]
    inner = next(c for c in contracts if c.get("containers") == ["servers"])
    named = {part.strip() for layer in inner["layers"] for part in layer.split("|")}
    parts = {p.name for p in (ROOT / "servers").iterdir() if (p / "__init__.py").is_file()}
    assert named == parts
    assert not [p.name for p in (ROOT / "servers").glob("*.py") if p.name != "__init__.py"]
