"""The executor side: the protocol client, its HTTP/1.1 transport and shared availability
observations.
"""
