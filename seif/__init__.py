"""seif: the command line and the Python SDK.

The SDK's names (``RuntimeClient``, ``SyncRuntimeClient``, ``Context``, ``Receipt``...; see
``docs/sdk.md``) are importable from here; they load on first use, so the command line does
not pay for the HTTP client. Provider formats: :mod:`seif.formats`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from seif.sdk import (
        ApprovalStatus,
        AuthenticationError,
        BadRequestError,
        BoundTool,
        ConflictError,
        Context,
        ContextDeliveryGateway,
        Contract,
        Delivery,
        Message,
        NotFoundError,
        Omission,
        PermissionDeniedError,
        Receipt,
        ReportingError,
        ResolutionBlockedError,
        RuntimeClient,
        SeifError,
        SeifRequestError,
        SeifTransportError,
        ServerError,
        SyncBoundTool,
        SyncRuntimeClient,
        SyncTurn,
        Tokens,
        ToolBuildRefused,
        ToolSchema,
        Turn,
        TurnRequest,
        TurnRequiredError,
        receipt_text,
    )

__all__ = [
    "__version__",
    # clients
    "RuntimeClient", "SyncRuntimeClient", "ContextDeliveryGateway",
    # values
    "Context", "Message", "ToolSchema", "Contract", "Omission", "Tokens",
    "Receipt", "ApprovalStatus", "TurnRequest", "Delivery", "ReportingError",
    # turns, and what a model is told of a receipt
    "Turn", "SyncTurn", "BoundTool", "SyncBoundTool", "receipt_text",
    # errors
    "SeifError", "SeifRequestError", "BadRequestError", "AuthenticationError",
    "PermissionDeniedError", "TurnRequiredError", "NotFoundError", "ConflictError",
    "ResolutionBlockedError", "ServerError", "SeifTransportError", "ToolBuildRefused",
]  # fmt: skip
_SDK = frozenset(__all__) - {"__version__"}


def __getattr__(name: str) -> Any:
    if name in _SDK:
        value = getattr(importlib.import_module("seif.sdk"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'seif' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SDK)
