"""The Python SDK: a client of the runtime's HTTP API (it imports nothing of ``servers/``).

Reference and quickstart: ``docs/sdk.md``. The names are exported from :mod:`seif` as well.
"""

from seif.sdk.client import RuntimeClient
from seif.sdk.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    ResolutionBlockedError,
    SeifError,
    SeifRequestError,
    SeifTransportError,
    ServerError,
    ToolBuildRefused,
    TurnRequiredError,
)
from seif.sdk.gateway import ContextDeliveryGateway
from seif.sdk.sync import SyncBoundTool, SyncRuntimeClient, SyncTurn
from seif.sdk.text import receipt_text
from seif.sdk.turns import BoundTool, Turn
from seif.sdk.types import (
    ApprovalStatus,
    Context,
    Contract,
    Delivery,
    Message,
    Omission,
    Receipt,
    ReportingError,
    Tokens,
    ToolSchema,
    TurnRequest,
)

__all__ = [
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
