"""What the tests share: harnesses that start real servers on loopback, the PostgreSQL test
support (a pytest plugin), the reference model, strategies and oracles, and the repository's
paths."""
