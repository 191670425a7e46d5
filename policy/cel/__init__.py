"""CEL conditions: checked and compiled once per build, run as closures over plain JSON values with
the CEL specification's semantics."""
