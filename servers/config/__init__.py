"""Configuration read at start: the credentials and bindings files and the approval token
(``files``), and the TLS contexts of executors' endpoints (``tls``).
"""
