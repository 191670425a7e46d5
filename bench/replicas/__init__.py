"""``python -m bench replicas``: durable dispatches per second of runtime replicas on one
PostgreSQL database, against one runtime on SQLite, in one run.

A durable dispatch is one ``POST /v1/context/tools/execute`` of a fresh call id of the read tool
``inspect-context`` that reaches the synthetic executor, its intent committed before the
executor is called and its result committed before the answer. Four configurations, each on a
fresh store:

- ``sqlite``: one ``seif serve --data DIR`` (the baseline; WAL, ``synchronous=FULL``, the
  decision log fsynced per record);
- ``pg1``, ``pg2``, ``pg3``: 1, 2 and 3 ``seif serve --store postgresql://.../DB --replica-id
  rN`` on one new database per configuration (created from ``template0``, dropped after).

Every configuration has the same bindings (with ``"traceKeyRef": "env:CONTEXT_TOOL_TRACE_KEY"``,
the same key in every replica's environment), the same build (the reference project), one
synthetic executor (``examples/reference-tools/executor.py``, one process for the whole run)
and the same load: a closed-loop client (``python -m bench.replicas load``, its own process,
an HTTP/1.1 keep-alive client on ``httptools`` and uvloop) with a fixed number of requests in
flight, spreading its requests round-robin over the replicas (request ``i`` to replica
``i mod n``), resolves included. Nothing is pinned: PostgreSQL, the replicas, the executor and
the client share the machine's cores.

``inspect-context`` allows 3 calls per context, so the client resolves the contexts its calls
need before it is measured (untimed), then sends a warm-up (untimed), then says it is ready and
waits; the run then starts the timed phase of every client at once. The calls of one context
are spread :data:`SPREAD` calls apart, so that calls in flight together rarely share a context
(the claiming transaction locks the context's row). A timed phase ends at a request count or a
duration, whichever comes first. ``rounds`` rounds run every configuration once each (the
order reversed every other round, each on a fresh store), so that slow spells of a shared
machine fall on all of them.

Every answer is checked (a 200 and a ``SUCCEEDED`` receipt that is not a duplicate); anything
else is an error and left out of the figures. The executor's count of executions must grow by
exactly the successes (each call dispatched once, by one replica), and after the replicas
stopped every success must be a ``SUCCEEDED`` intent in the store, and on PostgreSQL have its
``INTENT`` and ``RESULT`` records in the ``decision_log`` table.

Figures per configuration: dispatches per second (successes / wall time of the timed phases),
the p50 and p99 latency of one execute (client side, pooled over rounds). Over each timed
window the run reads ``/proc`` (:class:`bench.replicas.cpu.Sampler`): the CPU time of every
process of the machine, attributed to the replicas (and their event loop threads), the
PostgreSQL backends serving the configuration's database (by their process title),
PostgreSQL's own processes (WAL writer, checkpointer, ...), the executor, the client and this
process, or else to other load (other databases' backends, other processes, and what
``/proc/stat`` counts busy that no process accounts for); the time the benchmark's threads
spent runnable but waiting for a core (``schedstat``); and, every 10 ms, the system call each
replica's event loop thread is in (idle in ``epoll_wait``, waiting in ``poll`` on a synchronous
PostgreSQL read, or running).
It reports CPU microseconds per dispatch per component, the cores busy, and where the event
loops spent the window: what explains where adding replicas stops helping. Over the window
it also reads the server's WAL position and next transaction id (exact, but for the whole
server). ``ratios``: rates of 1 PostgreSQL replica / SQLite (target at least 0.5x), 2 / 1
replicas, 3 / 1 replicas (target at least 1.5x).

The PostgreSQL server: ``SEIF_BENCH_PG_URL`` (a libpq URL of a database the run may create
databases from), else ``postgresql://postgres@127.0.0.1:5432/postgres`` when it answers, else
a private server started from the installed binaries as the tests do
(``tests/support/pg_support.py``; that one runs with ``fsync=off``, so its figures are not durable:
the run says so).

The modules: :mod:`~bench.replicas.config` (the configurations and the load),
:mod:`~bench.replicas.load` (the client process), :mod:`~bench.replicas.processes` (the
PostgreSQL server and databases, the run's files, the client processes),
:mod:`~bench.replicas.cpu` (the ``/proc`` sampler), :mod:`~bench.replicas.rounds` (the run) and
:mod:`~bench.replicas.report` (the figures, rows, ratios and notes).
"""

from __future__ import annotations

from typing import Any

from bench.replicas.config import FULL, QUICK


def run(*, quick: bool = False) -> dict[str, Any]:
    from bench.replicas.report import report
    from bench.replicas.rounds import measure

    load = QUICK if quick else FULL
    return report(load, measure(load), quick=quick)
