"""`seif serve`: the runtime server, its own log and what it tells its operator."""
