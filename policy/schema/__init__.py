"""The bounded JSON Schema subset: the parsed schema, and the validator generated from it (its hot
path and its error collector)."""
