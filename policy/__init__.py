"""The pure policy core of seif: IR, canonical encodings, digests, schema validation.

Nothing here does I/O, reads a clock, draws random numbers or keeps global state: time, state
and observations come in as arguments and decisions come out as values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.engine.decision import ALLOW, DENY, DUPLICATE, Decision, decide
from policy.engine.disclosure import Disclosure, Omission, Tokens, disclose
from policy.engine.identity import argument_identity
from policy.engine.principal import principal_value, static_principal
from policy.engine.state import Approval, Call, ContextState, fingerprint, millis
from policy.engine.testing import TestReport, run_tests
from policy.explain import Explanation
from policy.ir import Project, Tool
from policy.json import digest as _digest
from policy.offline.replay import ReplayReport, WhatIfReport, replay, what_if


def contract_digest(contract: Tool | Mapping[str, Any]) -> str:
    """The contract digest of a compiled :class:`Tool` or of a declared tool mapping
    (``id``, ``name``, ``version``, ``parameters``, optional ``result`` and ``upstream``)."""
    if isinstance(contract, Tool):
        return contract.contract_digest
    return _digest.contract_digest(
        id=contract["id"],
        name=contract["name"],
        version=contract["version"],
        parameters=contract["parameters"],
        result=contract.get("result"),
        upstream=contract.get("upstream"),
    )


__all__ = [
    "disclose",
    "decide",
    "run_tests",
    "principal_value",
    "static_principal",
    "contract_digest",
    "Project",
    "Tool",
    "Disclosure",
    "Omission",
    "Tokens",
    "Explanation",
    "Call",
    "ContextState",
    "Approval",
    "Decision",
    "ALLOW",
    "DENY",
    "DUPLICATE",
    "TestReport",
    "argument_identity",
    "fingerprint",
    "millis",
    "replay",
    "what_if",
    "ReplayReport",
    "WhatIfReport",
]
