"""seif: the command line and the Python SDK."""

__version__ = "0.1.0"
