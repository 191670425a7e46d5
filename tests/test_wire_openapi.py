"""The OpenAPI document generated from the wire contract (servers/wire) agrees with the
hand-written one it replaces, but for the changes listed here, each a place where the types say
more than the hand-written document did (or a status it left out)."""

from __future__ import annotations

import copy
from typing import Any

from servers.http import openapi as hand_written
from servers.wire import openapi

SCHEMAS = "/components/schemas"
CHANGES = (  # (where, why)
    (f"{SCHEMAS}/Capabilities/properties/schemaSubset/properties/limits", "integers"),
    (f"{SCHEMAS}/Explanation/properties", "`rule` and `condition`: integers (indexes)"),
    (
        f"{SCHEMAS}/PendingList/properties/pending/items/required",
        "`reason`, `contextExpiresAt` and `coordinates` are always present",
    ),
    (
        f"{SCHEMAS}/Receipt/properties/decision/properties/errors/items/properties",
        "a schema error's `pointer`, `keyword` and `message` are strings",
    ),
    (
        f"{SCHEMAS}/Receipt/properties/decision/required",
        "`approvalRequired` and `explanation` (null or one) are always present",
    ),
    (
        f"{SCHEMAS}/Resolved/properties/contracts/items",
        "a contract carries `approval` and `maxCalls` too (the SDK reads both)",
    ),
    (
        "/paths/~1v1~1context~1tools~1pending/get/responses/400",
        "a non-UTF-8 `x-seif-approver` is 400, as on approve and reject",
    ),
    ("/paths/~1v1~1traces~1{contextRef}/get/responses/400", "a contextRef not Unicode text"),
    (
        "/paths/~1v1~1openapi.json/get/responses/200/content/application~1json/schema",
        "the document's four members, typed",
    ),
)


def _parts(pointer: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]


def _at(document: Any, pointer: str) -> Any:
    for part in _parts(pointer):
        document = document.get(part) if isinstance(document, dict) else None
    return document


def _put(document: Any, pointer: str, value: Any) -> None:
    *head, last = _parts(pointer)
    for part in head:
        document = document[part]
    document[last] = value


def test_the_generated_document_is_the_hand_written_one_but_for_the_listed_changes() -> None:
    for objectives in ((), ("authoring", "review")):
        old = hand_written.document(objectives)
        new = openapi.document(objectives)
        expected = copy.deepcopy(old)
        for pointer, _why in CHANGES:
            assert _at(old, pointer) != _at(new, pointer), pointer  # the list is exact
            _put(expected, pointer, copy.deepcopy(_at(new, pointer)))
        assert new == expected


def test_the_capabilities_are_the_hand_written_ones() -> None:
    from servers.wire.capabilities import capabilities

    for revisions in ((), ("2025-06-18", "2025-11-25")):
        assert capabilities(revisions) == hand_written.capabilities(revisions)
