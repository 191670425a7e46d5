"""The pure policy core of seif: IR, canonical encodings, digests, schema validation.

Nothing here does I/O, reads a clock, draws random numbers or keeps global state: time, state
and observations come in as arguments and decisions come out as values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy import digest as _digest
from policy.ir import Project, Tool


def contract_digest(contract: Tool | Mapping[str, Any]) -> str:
    """The contract digest of a compiled :class:`Tool` or of a declared tool mapping
    (``id``, ``name``, ``version``, ``parameters``, optional ``result``)."""
    if isinstance(contract, Tool):
        return contract.contract_digest
    return _digest.contract_digest(
        id=contract["id"], name=contract["name"], version=contract["version"],
        parameters=contract["parameters"], result=contract.get("result"),
    )


__all__ = ["Project", "Tool", "contract_digest"]
