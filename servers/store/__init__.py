"""Durable state: the data directory, the SQLite dispatch store, its rows, jobs and writer
thread.
"""
