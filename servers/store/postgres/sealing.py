"""Sealing a held call's arguments for a shared store: AES-256-GCM (``cryptography``'s AEAD).

A call waiting for approval keeps its exact arguments so that an approver on any replica can
see them (``GET /v1/context/tools/pending``). On PostgreSQL they are stored only sealed: the
key is derived with HKDF-SHA256 from the bindings' trace key (the same on every replica, and
never stored), under its own label, so it is independent of the fingerprint key derived from
the same secret. Each sealing takes a fresh random 96-bit nonce, and binds the ciphertext to
its row (context, call id, tool and fingerprint as associated data): a row's sealed arguments
cannot be moved to another row, nor changed, without failing to open.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

LABEL = b"seif/held-call-arguments/v1"
"""HKDF's ``info``: what the derived key is for (another use derives another key)."""
NONCE_BYTES = 12


class SealError(ValueError):
    """Sealed bytes that do not open with this key for this row (tampered, or another key)."""


class Sealer:
    """Seals and opens held arguments with the key derived from ``secret`` (the trace key)."""

    __slots__ = ("_aead",)

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the secret to derive the sealing key from is too short")
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=LABEL).derive(secret)
        self._aead = AESGCM(key)

    def __repr__(self) -> str:
        return "Sealer(<key withheld>)"

    def seal(self, plain: bytes, row: tuple[str, ...]) -> bytes:
        """The nonce, then the ciphertext and its tag, bound to ``row``."""
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plain, _bound(row))

    def open(self, sealed: bytes, row: tuple[str, ...]) -> bytes:
        """The plain bytes of :meth:`seal`; :class:`SealError` for anything else."""
        if len(sealed) < NONCE_BYTES + 16:
            raise SealError("the sealed arguments are truncated")
        try:
            return self._aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], _bound(row))
        except InvalidTag:
            raise SealError("the sealed arguments do not open for this row") from None


def _bound(row: tuple[str, ...]) -> bytes:
    """The row's identity as associated data: each part's length, then the part."""
    out = bytearray()
    for part in row:
        encoded = part.encode("utf-8")
        out += len(encoded).to_bytes(4, "big") + encoded
    return bytes(out)
