"""`seif bundle`: a self-contained Runtime bundle of a verified build.

``OUT/build/`` (the verified build), ``OUT/wheels/`` (this project and every runtime dependency,
hash-pinned), ``OUT/run`` (installs them offline into ``OUT/.venv`` on first use and starts
``seif serve`` with the bundled build), ``OUT/bindings.template.json``, ``OUT/contracts.json``,
``OUT/bundle.json`` and ``OUT/README.md``. Nothing else: never a credential, never a data
directory. The bundle is assembled in a temporary directory beside ``OUT`` and renamed into place.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from compiler.authoring.bindings import (
    CONTRACTS_FILE,
    contracts_document,
    json_bytes,
    write_template,
)
from compiler.builds.build import Build, load_build, write_build
from seif import __version__
from seif.bundle.files import readme, run_script
from seif.bundle.wheels import BundleError, build_wheels

BUNDLE_FORMAT = "seif.runtime-bundle.v1"
TEMPLATE_FILE = "bindings.template.json"
CONTENTS = frozenset(
    {"build", "wheels", "run", TEMPLATE_FILE, CONTRACTS_FILE, "bundle.json", "README.md"}
)


def _python() -> dict[str, str]:
    return {
        "implementation": platform.python_implementation(),
        "version": f"{sys.version_info.major}.{sys.version_info.minor}",
        "platform": sysconfig.get_platform(),
    }


def bundle_manifest(build: Build, wheels: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "format": BUNDLE_FORMAT,
        "build": build.digest,
        "buildFormat": build.format,
        "requiresRuntime": build.requires_runtime,
        "project": {"id": build.project.id, "version": build.project.version},
        "seif": __version__,
        "python": _python(),
        "wheels": wheels,
    }


def write_bundle(build: Build, dest: Path, source: Path) -> dict[str, Any]:
    """Write every part of the bundle into the empty directory ``dest``; returns bundle.json."""
    if write_build(build.project, dest / "build").data != build.data:
        raise BundleError(
            "BUNDLE_BUILD_MISMATCH", "the build written is not the build", usage=False
        )
    if load_build(dest / "build").digest != build.digest:
        raise BundleError("BUNDLE_BUILD_MISMATCH", "the build written does not verify", usage=False)
    wheels = build_wheels(source, dest / "wheels")
    write_template(build, dest / TEMPLATE_FILE)
    manifest = bundle_manifest(build, wheels)
    (dest / "bundle.json").write_bytes(json_bytes(manifest))
    (dest / "README.md").write_text(readme(manifest, contracts_document(build)), encoding="utf-8")
    run = dest / "run"
    run.write_text(run_script(manifest["python"]["version"]), encoding="utf-8")
    run.chmod(0o755)
    extra = {p.name for p in dest.iterdir()} - CONTENTS
    if extra:
        found = ", ".join(sorted(extra))
        raise BundleError("BUNDLE_UNEXPECTED_FILE", f"not part of a bundle: {found}", usage=False)
    return manifest


def out_dir(text: str) -> Path:
    """``--out`` as a path: new, or an empty directory (``BUNDLE_OUT_EXISTS`` otherwise)."""
    out = Path(text)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError("BUNDLE_OUT_EXISTS", f"`{text}` exists and is not an empty directory")
    return out


def make_bundle(build: Build, out: Path, source: Path) -> dict[str, Any]:
    """Assemble beside ``out`` and rename into place: ``out`` holds a whole bundle or nothing."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        manifest = write_bundle(build, staging, source)
        staging.chmod(0o755)
        if out.exists():
            out.rmdir()
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest
