"""Builds, the registry of verified builds, and promotion."""
