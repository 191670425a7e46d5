"""The decision log: an append-only CBOR sequence (``decision_log``), what a record may hold
and its encoding (``encoding``), reading it back (``reading``) and the index of each context's
records that serves ``GET /v1/traces/{contextRef}`` (``index``).
"""
