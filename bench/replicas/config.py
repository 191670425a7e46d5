"""The configurations, the load and the constants of ``python -m bench replicas``."""

from __future__ import annotations

from dataclasses import dataclass

TRACE_KEY_ENV = "CONTEXT_TOOL_TRACE_KEY"
TRACE_KEY = "bench-replicas-shared-trace-key-5e0c7a93d1f4"
PG_URL_ENV = "SEIF_BENCH_PG_URL"
MACHINE_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DATABASE_PREFIX = "seif_bench_"
SPREAD = 256
"""The calls of one context are this many calls apart (the calls in flight together use
different contexts)."""
SAMPLE_S = 0.5
"""How often the CPU sampler reads ``/proc`` during a timed window (a process that ends within
the window keeps the CPU time of its last sample)."""
PG1_VS_SQLITE_GOAL = 0.5
PG3_VS_PG1_GOAL = 1.5
CLIENT_BOUND = 0.8
"""A client process using this fraction of one core or more over its timed phase is (nearly)
saturated: the rate it measures is then a lower bound."""


@dataclass(frozen=True, slots=True)
class Config:
    key: str
    label: str
    store: str  # "sqlite" or "postgresql"
    replicas: int


CONFIGS = (
    Config("sqlite", "1 runtime, SQLite (--data)", "sqlite", 1),
    Config("pg1", "1 replica, PostgreSQL", "postgresql", 1),
    Config("pg2", "2 replicas, PostgreSQL", "postgresql", 2),
    Config("pg3", "3 replicas, PostgreSQL", "postgresql", 3),
)
RATIOS = {
    "1 replica PostgreSQL vs SQLite": ("pg1", "sqlite"),
    "2 replicas vs 1": ("pg2", "pg1"),
    "3 replicas vs 1 replica PostgreSQL": ("pg3", "pg1"),
}


@dataclass(frozen=True, slots=True)
class Load:
    concurrency: int
    """Requests in flight at once (over all client processes), the same for every
    configuration."""
    requests: int
    """At most this many timed executes per configuration and round ..."""
    duration_s: float
    """... or this long, whichever comes first."""
    warmup: int
    """Untimed executes before each timed phase."""
    rounds: int
    clients: int
    """Client processes (the concurrency and the requests split between them)."""


FULL = Load(concurrency=32, requests=15_000, duration_s=12.0, warmup=600, rounds=2, clients=1)
QUICK = Load(concurrency=16, requests=400, duration_s=1.5, warmup=48, rounds=1, clients=1)
