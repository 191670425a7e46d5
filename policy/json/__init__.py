"""JSON as the engine reads and writes it: the strict boundary for untrusted JSON, immutable values,
canonical encodings, digests, pointers and where a value is written."""
