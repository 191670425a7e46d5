"""The runtime's HTTP layer: the aiohttp application (``app``), wire types (``wire``), the
OpenAPI document (``openapi``) and the listener with its header timeout and connection limit
(``serving``).
"""
