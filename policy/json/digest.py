"""Content digests: contract digests (SHA-256 over canonical CBOR) and build digests (BLAKE3)."""

from __future__ import annotations

import hashlib

import blake3

from policy.json.canonical import canonical_cbor
from policy.json.value import JsonValue


def contract_digest(
    *,
    id: str,
    name: str,
    version: str,
    parameters: JsonValue,
    result: JsonValue | None,
    upstream: JsonValue | None = None,
) -> str:
    """``sha256:<hex>`` of the canonical CBOR of the contract map, exactly as the spec fixes it.

    ``parameters`` and ``result`` enter exactly as declared; description, effect, approval,
    maxCalls and timeoutMs are policy, not contract, and do not. ``upstream`` (the pin of a tool
    imported from an upstream MCP server) enters only when the tool has one, so every digest of
    a tool without it stays what it was.
    """
    contract: dict[str, JsonValue] = {
        "id": id,
        "name": name,
        "version": version,
        "arguments": parameters,
        "result": result,
    }
    if upstream is not None:
        contract["upstream"] = upstream
    return "sha256:" + hashlib.sha256(canonical_cbor(contract)).hexdigest()


def build_digest(data: bytes) -> str:
    """``blake3:<hex>`` of a build's bytes."""
    return "blake3:" + blake3.blake3(data).hexdigest()
