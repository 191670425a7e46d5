"""Replay: recorded disclosures evaluated again by the pure engine and compared exactly.

:func:`replay` takes a build's IR and any iterable of decision-log records (decoded CBOR or
JSON), evaluates every ``DISCLOSED`` record of that build from the inputs recorded in it
(:mod:`policy.offline.recorded`) and compares the result with the record's ``disclosure`` summary as
JSON values: numbers by value, a boolean never equal to a number, explanations included.
Records of other builds are counted, never evaluated; other events are counted. Nothing is read
but the records, and nothing is called but the engine.

A record's principal is its ``principal`` (``policy.offline.recorded.recorded_principal``),
whose ``subject`` is a keyed fingerprint: a disclosure whose ``when`` reads ``principal.subject``
cannot be evaluated again as it was made. Such a record (a subject recorded, and its objective's
rules read the subject) is not evaluated: it is reported as not reproducible, neither
reproduced nor a mismatch.

:func:`what_if` (from :mod:`policy.offline.whatif`) is the other half: what a candidate build would
have disclosed differently for the same records.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from policy.ir import Project
from policy.json.pointer import join
from policy.json.value import json_equal
from policy.offline.recorded import (
    CACHE_SIZE,
    DISCLOSED,
    Evaluated,
    Evaluator,
    Inputs,
    Record,
    RecordRef,
    build_of,
    counts,
    disclosure_summary,
    input_key,
    inputs_of,
)
from policy.offline.whatif import RecordChange, WhatIfReport, what_if


class _Absent:
    """The side of a difference that has nothing at its pointer."""

    def __repr__(self) -> str:
        return "absent"


ABSENT: Any = _Absent()


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """One place where the recorded and the replayed values differ (a JSON pointer into the
    record); :data:`ABSENT` for a side that has nothing there."""

    pointer: str
    recorded: Any
    replayed: Any

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pointer": self.pointer}
        if self.recorded is not ABSENT:
            out["recorded"] = self.recorded
        if self.replayed is not ABSENT:
            out["replayed"] = self.replayed
        return out


def differences(recorded: Any, replayed: Any, pointer: str = "") -> list[Difference]:
    """Where two JSON values differ: maps key by key (the replayed order first), lists of one
    length item by item, anything else as a whole (JSON equality)."""
    if isinstance(recorded, Mapping) and isinstance(replayed, Mapping):
        out: list[Difference] = []
        for key in [*replayed, *(k for k in recorded if k not in replayed)]:
            where = join(pointer, key)
            mine, theirs = recorded.get(key, ABSENT), replayed.get(key, ABSENT)
            if mine is ABSENT or theirs is ABSENT:
                out.append(Difference(pointer=where, recorded=mine, replayed=theirs))
            else:
                out += differences(mine, theirs, where)
        return out
    lists = (list, tuple)
    if (
        isinstance(recorded, lists)
        and isinstance(replayed, lists)
        and len(recorded) == len(replayed)
    ):
        pairs = enumerate(zip(recorded, replayed, strict=True))
        return [d for i, (a, b) in pairs for d in differences(a, b, f"{pointer}/{i}")]
    if json_equal(recorded, replayed):
        return []
    return [Difference(pointer=pointer, recorded=recorded, replayed=replayed)]


def reproduces(evaluated: Evaluated, recorded: Any) -> bool:
    """The fast exact check: ``==``, then the kind of every number and boolean."""
    if evaluated.summary != recorded:
        return False
    for path, leaves in evaluated.scalars:
        container = recorded
        for step in path:
            container = container[step]
        for key, is_bool in leaves:
            if (type(container[key]) is bool) is not is_bool:
                return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Mismatch:
    """A ``DISCLOSED`` record that does not reproduce: its differences, or the ``problem``
    that kept it from being evaluated (a malformed record)."""

    record: RecordRef
    differences: tuple[Difference, ...] = ()
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            **self.record.to_json(),
            "differences": [d.to_json() for d in self.differences],
        }
        if self.problem is not None:
            out["problem"] = self.problem
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    """``records`` read; ``disclosed``: the ``DISCLOSED`` records of ``build``, of which
    ``reproduced`` reproduced, ``not_reproducible`` could not be evaluated again (their
    disclosure reads ``principal.subject``, recorded as a fingerprint) and the others are
    ``mismatches``; ``other_builds``: the
    ``DISCLOSED`` records of other builds (digest, count), not evaluated; ``other_events``: the
    records of other events; ``distinct_inputs``: the evaluations that took."""

    build: str
    records: int
    disclosed: int
    reproduced: int
    mismatches: tuple[Mismatch, ...]
    other_builds: tuple[tuple[str, int], ...]
    other_events: int
    distinct_inputs: int
    not_reproducible: tuple[RecordRef, ...] = ()

    @property
    def skipped_other_build(self) -> int:
        return sum(n for _, n in self.other_builds)

    @property
    def ok(self) -> bool:
        """Every disclosure of this build reproduced, and a log with disclosures has some of
        this build (disclosures of other builds alone verify nothing)."""
        return not self.mismatches and (self.disclosed > 0 or not self.other_builds)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "build": self.build,
            "records": self.records,
            "disclosed": self.disclosed,
            "reproduced": self.reproduced,
            "mismatched": len(self.mismatches),
            "notReproducible": [r.to_json() for r in self.not_reproducible],
            "skippedOtherBuild": self.skipped_other_build,
            "otherBuilds": dict(self.other_builds),
            "otherEvents": self.other_events,
            "distinctInputs": self.distinct_inputs,
            "mismatches": [m.to_json() for m in self.mismatches],
        }


def subject_bound(ir: Project, inputs: Inputs) -> bool:
    """Whether the disclosure of ``inputs`` cannot be evaluated again as it was made: a
    subject was recorded (as a fingerprint) and the objective's rules read
    ``principal.subject``."""
    if inputs.principal is None or inputs.principal.get("subject") is None:
        return False
    reads = ir.disclosure_principal.get(inputs.objective, frozenset())
    return "subject" in reads or "*" in reads


def check(evaluator: Evaluator, record: Record) -> Mismatch | None:
    """None when the ``DISCLOSED`` record reproduces with the evaluator's IR; else how not."""
    inputs = inputs_of(record)
    if isinstance(inputs, str):
        return Mismatch(record=RecordRef.of(record), problem=inputs)
    return compared(evaluator, record, inputs)


def compared(evaluator: Evaluator, record: Record, inputs: Inputs) -> Mismatch | None:
    """None when ``record``, whose inputs are ``inputs``, reproduces; else how not."""
    evaluated = evaluator.evaluate(inputs, input_key(inputs))
    recorded = record["disclosure"]
    if reproduces(evaluated, recorded):
        return None
    found = differences(recorded, evaluated.summary, "/disclosure")
    return Mismatch(record=RecordRef.of(record), differences=tuple(found)) if found else None


def replay(
    ir: Project, records: Iterable[Record], *, build_digest: str, cache_size: int = CACHE_SIZE
) -> ReplayReport:
    """Evaluate every ``DISCLOSED`` record of ``build_digest`` with ``ir`` and compare the
    result with the record's ``disclosure``. ``cache_size``: see :data:`CACHE_SIZE`."""
    evaluator = Evaluator(ir, cache_size)
    total = disclosed = other_events = 0
    others: Counter[str] = Counter()
    mismatches: list[Mismatch] = []
    unverified: list[RecordRef] = []
    for record in records:
        total += 1
        if record.get("event") != DISCLOSED:
            other_events += 1
            continue
        if record.get("build") != build_digest:
            others[build_of(record)] += 1
            continue
        disclosed += 1
        inputs = inputs_of(record)
        if isinstance(inputs, str):
            mismatches.append(Mismatch(record=RecordRef.of(record), problem=inputs))
        elif subject_bound(ir, inputs):
            unverified.append(RecordRef.of(record))
        elif (found := compared(evaluator, record, inputs)) is not None:
            mismatches.append(found)
    return ReplayReport(
        build=build_digest,
        records=total,
        disclosed=disclosed,
        reproduced=disclosed - len(mismatches) - len(unverified),
        not_reproducible=tuple(unverified),
        mismatches=tuple(mismatches),
        other_builds=counts(others),
        other_events=other_events,
        distinct_inputs=evaluator.distinct,
    )


__all__ = [
    "ABSENT",
    "CACHE_SIZE",
    "DISCLOSED",
    "Difference",
    "Mismatch",
    "RecordChange",
    "ReplayReport",
    "WhatIfReport",
    "differences",
    "disclosure_summary",
    "replay",
    "reproduces",
    "what_if",
]
