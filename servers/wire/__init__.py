"""The wire contract of seif's HTTP servers, in one place (``docs/wire.md``).

- :mod:`servers.wire.errors`: every error code with its HTTP status and default message, the
  one exception a refusal raises (:class:`~servers.wire.errors.Refused`), JSON-RPC codes;
- :mod:`servers.wire.reasons`: the receipt reasons the runtime adds to the engine's;
- :mod:`servers.wire.requests` and :mod:`servers.wire.fields`: request bodies as typed values,
  and the one decoder that checks them;
- :mod:`servers.wire.answers`: every answer's shape;
- :mod:`servers.wire.routes`: the runtime's route table, from which the HTTP layer registers
  its routes and :mod:`servers.wire.openapi` generates the OpenAPI document.

It imports none of the servers that use it (import-linter: ``pyproject.toml``).
"""
