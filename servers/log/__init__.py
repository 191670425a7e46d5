"""The decision log: an append-only CBOR sequence, and what a record may hold."""
