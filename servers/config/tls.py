"""TLS for executor endpoints: the client contexts that bindings trust.

A binding's ``caFile`` names a PEM bundle of CA certificates; without one, an ``https://``
binding trusts the system trust store. Every context (:func:`client_context`):

- verifies the certificate chain and the host name (``ssl.PROTOCOL_TLS_CLIENT``: hostname
  checking and ``CERT_REQUIRED``), so a certificate for another name is refused;
- refuses TLS below 1.2 and offers only ``http/1.1`` by ALPN;
- reads nothing from the environment of its own accord: unlike ``ssl.create_default_context``
  it ignores ``SSLKEYLOGFILE``, so TLS session keys are never written to a file an environment
  variable names. (The system trust store is OpenSSL's default, which OpenSSL itself locates,
  honouring ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``.)

:class:`TrustStores` builds these at load: one context per distinct CA file of a bindings
file, and one for the system store per process, each shared by every binding that trusts the
same thing (and so by their kept-alive connections). No context is built per request.
"""

from __future__ import annotations

import functools
import os
import ssl
from pathlib import Path

from compiler.readfile import FileTooLarge, NotRegularFile, read_regular
from policy.diagnostic import Diagnostic, DiagnosticError

MAX_CA_FILE_BYTES = 4 << 20
"""A CA bundle larger than this is refused (the whole public web PKI is about 0.25 MiB)."""

_BEGIN_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
_PRIVATE_KEY = b"PRIVATE KEY-----"


class CaFileProblem(DiagnosticError):
    """Why a CA file was refused: one diagnostic, ``CA_FILE_UNREADABLE`` or ``CA_FILE_INVALID``,
    with a message for the operator (it quotes no file content); the bindings loader places it
    at the binding's ``caFile``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__([Diagnostic(code=code, message=message)])


def client_context(ca_file: Path | None = None) -> ssl.SSLContext:
    """A verifying client context trusting ``ca_file`` only, or the system trust store.

    Raises ``ssl.SSLError`` when ``ca_file`` holds no certificate OpenSSL can load (use
    :meth:`TrustStores.ca_file` for a checked file and a located problem)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # check_hostname, CERT_REQUIRED
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    if ca_file is None:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        context.load_verify_locations(cafile=os.fspath(ca_file))
    return context


def _read(path: Path, shown: str) -> bytes:
    """The bytes of a regular file of at most :data:`MAX_CA_FILE_BYTES`, opened without
    blocking and checked once open (:func:`~compiler.readfile.read_regular`)."""
    unreadable = "CA_FILE_UNREADABLE"
    try:
        return read_regular(path, MAX_CA_FILE_BYTES)
    except FileNotFoundError:
        raise CaFileProblem(unreadable, f"{shown} does not exist") from None
    except NotRegularFile:
        raise CaFileProblem(unreadable, f"{shown} is not a regular file") from None
    except FileTooLarge:
        limit = f"{MAX_CA_FILE_BYTES >> 20} MiB"
        raise CaFileProblem("CA_FILE_INVALID", f"{shown} is larger than {limit}") from None
    except OSError as error:
        raise CaFileProblem(
            unreadable, f"{shown} cannot be read ({type(error).__name__})"
        ) from None


def _checked_context(path: Path, shown: str) -> ssl.SSLContext:
    """The context of one CA file, after checking it is a PEM bundle of certificates only."""
    data = _read(path, shown)
    use = "give a PEM bundle of CA certificates (`-----BEGIN CERTIFICATE-----`)"
    if _PRIVATE_KEY in data:
        message = f"{shown} holds a private key; give the CA certificates only"
        raise CaFileProblem("CA_FILE_INVALID", message)
    if _BEGIN_CERTIFICATE not in data:
        raise CaFileProblem("CA_FILE_INVALID", f"{shown} holds no PEM certificate; {use}")
    try:
        context = client_context(path)
    except (ssl.SSLError, OSError):
        message = f"{shown} is not a valid PEM certificate bundle; {use}"
        raise CaFileProblem("CA_FILE_INVALID", message) from None
    if not context.cert_store_stats().get("x509"):
        raise CaFileProblem("CA_FILE_INVALID", f"{shown} holds no certificate; {use}")
    return context


@functools.cache
def system_context() -> ssl.SSLContext:
    """The system trust store's context: built once per process (about 25 ms), when a binding
    first needs it. The store is the host's, the same for every bindings file."""
    return client_context()


class TrustStores:
    """The TLS contexts of one bindings file, each built once: one per distinct CA file (by its
    resolved path), and the system trust store's, shared by every file."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._files: dict[Path, ssl.SSLContext] = {}

    def system(self) -> ssl.SSLContext:
        return system_context()

    def ca_file(self, text: str) -> tuple[Path, ssl.SSLContext]:
        """The path (absolute, or relative to the bindings file's folder) and context of a
        ``caFile``; raises :class:`CaFileProblem`."""
        shown = f"`{text[:64]}…`" if len(text) > 64 else f"`{text}`"
        if not text or "\0" in text:
            raise CaFileProblem("CA_FILE_UNREADABLE", f"{shown} is not a file path")
        path = self._folder / text
        try:
            key = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop
            raise CaFileProblem("CA_FILE_UNREADABLE", f"{shown} cannot be resolved") from None
        found = self._files.get(key)
        if found is None:  # a refused file is not remembered: each binding names its own
            found = self._files[key] = _checked_context(key, shown)
        return key, found
