"""The decision log: an append-only CBOR sequence (``decision_log``), what a record may hold
and its encoding (``encoding``), the chain of record digests each record's ``prev`` makes and
the one walk that checks it (``chain``), reading it back (``reading``) and the index of each
context's records that serves ``GET /v1/traces/{contextRef}`` (``index``).
"""
