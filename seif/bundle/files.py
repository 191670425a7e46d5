"""The texts of a Runtime bundle: its ``run`` script and its README."""

from __future__ import annotations

from typing import Any

RUN_SCRIPT = r"""#!/usr/bin/env bash
# Start the seif runtime of this bundle with the bundled build:
#   ./run --bindings FILE --credentials FILE --data DIR [--host H] [--port N] [--require-turn]
# Every argument is passed on to `seif serve --build <this bundle>/build`.
# On first use it creates .venv in this directory and installs the bundled wheels into it,
# offline: pip runs isolated from every pip configuration file and PIP_* variable, with
# --no-index and hash-checked requirements, so no package index is ever contacted.
set -euo pipefail
here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
want="@PYTHON@"
venv="$here/.venv"
stamp="$venv/.seif-installed"

version_of='import sys; print(*sys.version_info[:2], sep=".")'

find_python() {
  local candidate found
  for candidate in "${SEIF_PYTHON:-}" "python$want" python3; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    found="$("$candidate" -c "$version_of" 2>/dev/null)" || true
    if [ "$found" = "$want" ]; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

install() {
  local python
  if ! python="$(find_python)"; then
    echo "run: this bundle's wheels are for Python $want;" \
      "put python$want on PATH or set SEIF_PYTHON" >&2
    exit 2
  fi
  echo "run: installing the bundled wheels into $venv (offline, first use only)" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  PIP_CONFIG_FILE=/dev/null "$venv/bin/python" -m pip --isolated --disable-pip-version-check \
    install --quiet --no-index --find-links "$here/wheels" --only-binary=:all: \
    --require-hashes --requirement "$here/wheels/requirements.txt" >&2
  touch "$stamp"
}

if [ ! -f "$stamp" ]; then
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$here/.install.lock"
    flock 9
  fi
  [ -f "$stamp" ] || install
  exec 9>&-
fi
exec "$venv/bin/python" -I -m seif.cli serve --build "$here/build" "$@"
"""


def run_script(python: str) -> str:
    return RUN_SCRIPT.replace("@PYTHON@", python)


def _tool_table(contracts: dict[str, Any]) -> str:
    if not contracts["tools"]:
        return "This build declares no tool: the bindings file needs no entry.\n"
    rows = [
        "| tool | version | contract digest | secret variable |",
        "| --- | --- | --- | --- |",
    ]
    rows += [
        f"| `{t['id']}` | {t['version']} | `{t['contractDigest']}` | `{t['secretEnv']}` |"
        for t in contracts["tools"]
    ]
    return "\n".join(rows) + "\n"


def readme(manifest: dict[str, Any], contracts: dict[str, Any]) -> str:
    project = manifest["project"]
    return f"""# seif Runtime bundle: {project["id"]} {project["version"]}

Build `{manifest["build"]}` ({manifest["buildFormat"]}, requires {manifest["requiresRuntime"]}).
Runs on {manifest["python"]["implementation"]} {manifest["python"]["version"]} on
`{manifest["python"]["platform"]}` (the wheels are built for it), with no package index.

| path | what it is |
| --- | --- |
| `build/` | the verified build: `build.cbor` (its BLAKE3 is the digest) and `manifest.json` |
| `wheels/` | seif {manifest["seif"]} and every runtime dependency, pinned by SHA-256 |
| `run` | installs `wheels/` into `.venv` here on first use, offline; starts `seif serve` |
| `bindings.template.json` | a bindings file with one entry per tool to fill in |
| `contracts.json` | what each executor's `GET {{endpoint}}/describe` must answer |
| `bundle.json` | this bundle's manifest: build digest, Python, every wheel with its SHA-256 |

The bundle holds no credential and no data directory. Keep both outside it.

## Start

1. Copy `bindings.template.json` to a bindings file of your own and replace every `endpoint`
   with your executor's URL (`https://`, or `http://` on a loopback host only). Set
   `environment` and `revision` for this environment revision.
2. Write a credentials file naming your application tokens by reference:

   ```json
   {{"credentials": [{{"id": "my-app", "tokenRef": "env:SEIF_APP_TOKEN",
                       "scopes": ["context.resolve", "tools.execute"]}}]}}
   ```

3. Export the secrets the two files name (`SEIF_APP_TOKEN`, each `CONTEXT_TOOL_*_TOKEN` below)
   and the operator approval token `SEIF_CONTEXT_TOOL_APPROVAL_TOKEN`, then:

   ```sh
   ./run --bindings bindings.json --credentials credentials.json --data /var/lib/seif --port 8787
   # seif runtime listening on http://127.0.0.1:8787
   curl http://127.0.0.1:8787/v1/health
   ```

`run` works from any directory. It needs `python{manifest["python"]["version"]}` on `PATH` (or
`SEIF_PYTHON=/path/to/python{manifest["python"]["version"]}`) and `bash`; the first start takes a
few seconds longer while it installs. Remove `.venv` to reinstall.

## Executor contracts

Every bound executor must answer `GET {{endpoint}}/describe` with
`{{"contract": "{contracts["executorContract"]}", "tool": {{"id", "version", "contractDigest"}}}}`
exactly as below (also in `contracts.json`); readiness (`GET /v1/ready`) checks it.

{_tool_table(contracts)}"""
