"""The sizes the wire contract promises: a body, an identifier, a free text."""

from __future__ import annotations

from typing import Final

MAX_BODY_BYTES: Final = 1 << 20
"""A request body's largest size, decompressed (413 ``TOO_LARGE`` past it)."""
MAX_ID_LENGTH: Final = 256
"""An identifier's most characters: a contextRef, a callId, a coordinate."""
MAX_TEXT_LENGTH: Final = 4096
"""A free text's most characters (an approver's reason)."""
