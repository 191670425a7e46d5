"""The cost of the chain of record digests (record format 2), per record.

Records: ``DISCLOSED`` records of the reference project as the runtime writes them
(``bench.replay``: about 1.1 KB each) and a small ``INTENT``-like record (about 400 bytes).

Measured, in one run, batches interleaved (``bench.harness.measure_all``):

- ``append``: ``DecisionLog.append`` with ``fsync_every=0`` (no fsync: the chain's share is the
  largest there), against the same appends with the digest step a no-op (the writer looks
  ``servers.log.chain.record_digest`` up at every write; both variants set that hook before
  each append, so they pay the same for it);
- ``digest`` and ``encode``: BLAKE3 of one record's bytes (what the chain adds to a write) and
  the record's canonical CBOR encoding (what every write costs already);
- ``verify``: ``seif trace verify``'s walk (``TraceLog.verify``: decoding, envelope checks and a
  digest per record) over a generated log, against a plain read of the same log
  (``TraceLog.records``), and the runtime's own pass at open (``servers.log.reading.scan``:
  decoding, the canonical form checked, the chain walked); records per second.

Rows are per record.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.harness import Stats, measure_all, quantile
from bench.replay import REFERENCE, generate
from compiler import compile_project
from compiler.builds.build import make_build
from seif.tracefile import export, open_log
from servers.log import chain
from servers.log.decision_log import DecisionLog, admit
from servers.log.encoding import encoded
from servers.log.reading import scan

N_LOG, N_QUICK = 50_000, 3_000
NO_DIGEST = "blake3:" + "0" * 64
INTENT: dict[str, Any] = {
    "event": "INTENT",
    "build": "blake3:" + "ab" * 32,
    "environment": "bench",
    "bindingRevision": 1,
    "coordinates": dict.fromkeys(("environment", "deployment"), "")
    | {"objective": "authoring", "consumer": "course-authoring", "trace": "trace-00000001"},
    "contextRef": "ctx_" + "x" * 24,
    "tool": "propose-change",
    "callId": "call-000001",
    "outcome": "ALLOW",
    "reason": None,
    "approvalRequired": True,
    "explanation": {"pointer": "/profiles/1/toolRules/2", "profile": "authoring", "rule": 2},
    "fingerprint": "f" * 64,
}


def _no_digest(_data: bytes) -> str:
    return NO_DIGEST


def _appends(
    log: DecisionLog, record: dict[str, Any], hook: Callable[[bytes], str]
) -> Callable[[], object]:
    def append() -> int:
        chain.record_digest = hook
        return log.append(record)

    return append


def _record_rows(label: str, record: dict[str, Any], tmp: Path, repeats: int) -> dict[str, Stats]:
    """Append with the chain and with a no-op digest, BLAKE3 and encoding of one record."""
    real = chain.record_digest
    fields = admit(record)
    raw = encoded({**fields, "prev": NO_DIGEST}, 1)
    chained = DecisionLog.open(tmp / f"{label}-chained.cbor", fsync_every=0)
    plain = DecisionLog.open(tmp / f"{label}-plain.cbor", fsync_every=0)
    try:
        found = measure_all(
            {
                f"append {label}, chained": _appends(chained, record, real),
                f"append {label}, digest a no-op": _appends(plain, record, _no_digest),
                f"BLAKE3 of the {label} record's bytes": lambda: real(raw),
                f"canonical CBOR of the {label} record": lambda: encoded(dict(fields), 1),
            },
            repeats=repeats,
            min_time=0.01,
        )
    finally:
        chain.record_digest = real
        chained.close()
        plain.close()
    found[f"bytes of the {label} record"] = Stats(len(raw), len(raw), 1)  # not a time
    return found


def _passes(runs: dict[str, Callable[[], int]], n: int, repeats: int) -> dict[str, Stats]:
    """Each pass ``repeats`` times, interleaved: ns per record."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter_ns()
            done = run()
            times[name].append((time.perf_counter_ns() - start) / n)
            assert done == n, (name, done, n)
    out = {}
    for name, values in times.items():
        values.sort()
        out[name] = Stats(statistics.median(values), quantile(values, 0.99), n * repeats)
    return out


def _walks(path: Path, jsonl: Path, n: int, repeats: int) -> dict[str, Stats]:
    def verify(where: Path) -> Callable[[], int]:
        def run() -> int:
            found = open_log(where).verify()
            assert found.ok, found
            return found.records

        return run

    def read() -> int:
        return sum(1 for _ in open_log(path).records())

    def at_open() -> int:
        with path.open("rb") as fp:
            return scan(fp).records

    runs = {
        "verify (the chain walk)": verify(path),
        "plain read of the same log": read,
        "the runtime's pass at open (checked, chained)": at_open,
        "verify a jsonl export (each record re-encoded)": verify(jsonl),
    }
    return _passes(runs, n, repeats)


def _jsonl_of(path: Path, out: Path) -> Path:
    export(path.parent, out, "jsonl")
    return out


def run(*, quick: bool = False) -> dict[str, Any]:
    total = N_QUICK if quick else N_LOG
    repeats = 5 if quick else 15
    build = make_build(compile_project(REFERENCE))
    with tempfile.TemporaryDirectory(prefix="seif-bench-chain-") as tmp:
        root = Path(tmp)
        data = root / "data"
        data.mkdir()
        log = data / "decisions.cbor"
        generate(log, build, total)
        disclosed = _strip(next(iter(open_log(log).records())))
        rows = _record_rows("DISCLOSED", disclosed, root, repeats)
        rows |= _record_rows("INTENT", INTENT, root, repeats)
        walks = _walks(log, _jsonl_of(log, root / "log.jsonl"), total, 3 if quick else 5)
        size = os.path.getsize(log)
    return _result(rows, walks, total, size)


def _strip(record: dict[str, Any]) -> dict[str, Any]:
    """The fields a caller gives (the log sets ``v``, ``seq`` and ``prev``)."""
    return {k: v for k, v in record.items() if k not in ("v", "seq", "prev")}


def _row(name: str, stats: Stats) -> dict[str, Any]:
    return {"name": name, "impl": "seif", **stats.to_json()}


def _result(
    records: dict[str, Stats], walks: dict[str, Stats], total: int, size: int
) -> dict[str, Any]:
    sizes = {k: int(v.median_ns) for k, v in records.items() if k.startswith("bytes")}
    timed = {k: v for k, v in records.items() if not k.startswith("bytes")}
    rows = [_row(k, v) for k, v in timed.items()] + [_row(k, v) for k, v in walks.items()]
    ratios = {}
    for label in ("DISCLOSED", "INTENT"):
        chained, plain = timed[f"append {label}, chained"], timed[f"append {label}, digest a no-op"]
        ratios[f"append {label}: chained / digest a no-op"] = chained.median_ns / plain.median_ns
    verify, read = walks["verify (the chain walk)"], walks["plain read of the same log"]
    ratios["verify / plain read"] = verify.median_ns / read.median_ns
    per_s = {name: round(1e9 / s.median_ns) for name, s in walks.items()}
    return {
        "log": {"records": total, "bytes": size},
        "record_bytes": sizes,
        "rows": rows,
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
        "records_per_s": per_s,
        "load_average": round(os.getloadavg()[0], 1),
        "notes": list(_notes(timed, walks, per_s, total)),
    }


def _notes(
    timed: dict[str, Stats], walks: dict[str, Stats], per_s: dict[str, int], total: int
) -> Iterator[str]:
    for label in ("DISCLOSED", "INTENT"):
        chained, plain = timed[f"append {label}, chained"], timed[f"append {label}, digest a no-op"]
        digest = timed[f"BLAKE3 of the {label} record's bytes"]
        yield (
            f"append {label}: {chained.median_ns / 1000:.2f} µs chained, "
            f"{plain.median_ns / 1000:.2f} µs with the digest a no-op "
            f"(+{chained.median_ns - plain.median_ns:.0f} ns; BLAKE3 alone "
            f"{digest.median_ns:.0f} ns)"
        )
    at_open = per_s["the runtime's pass at open (checked, chained)"]
    yield (
        f"verify {total} records: {per_s['verify (the chain walk)']} records/s, plain read "
        f"{per_s['plain read of the same log']} records/s, the runtime's pass at open "
        f"{at_open} records/s"
    )
