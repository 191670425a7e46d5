"""Durable state: the data directory (``datadir``: the lock and the runtime key), the SQLite
dispatch store (``dispatch``; its rows, jobs and writer thread in ``rows``, ``jobs``,
``writer``), the checks run before serving (``opening``) and the reconciliation of the store
with the decision log at start (``reconcile``).
"""
