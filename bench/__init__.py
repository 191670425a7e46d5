"""Benchmarks: ``python -m bench NAME [--json] [--quick]``; ``python -m bench all`` runs each."""
