"""The runtime's HTTP layer: the aiohttp application, wire types and the OpenAPI document."""
