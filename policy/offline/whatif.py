"""What-if: what a candidate build would have disclosed for recorded resolutions.

:func:`what_if` evaluates the inputs of every ``DISCLOSED`` record of the baseline build
(:mod:`policy.offline.recorded`) with the baseline IR and with a candidate IR, and reports per
record what the candidate would have disclosed or omitted differently, with a summary: records
changed, tools newly disclosed and newly withheld, status and budget changes. It compares the two
evaluations (``policy.offline.replay.replay`` checks the baseline against the log itself) and
ignores explanations, whose pointers move whenever a declaration moves. Pure, like the engine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from policy.ir import Project
from policy.offline.recorded import (
    CACHE_SIZE,
    DISCLOSED,
    Evaluator,
    Record,
    RecordRef,
    Summary,
    build_of,
    counts,
    input_key,
    inputs_of,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Withheld:
    """A tool the baseline disclosed and the candidate would not; ``reason`` is the candidate's
    omission reason, None when the candidate does not include the tool at all."""

    id: str
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "reason": self.reason}


@dataclass(frozen=True, slots=True, kw_only=True)
class OmissionChange:
    """An omission (or cause) whose reason differs; None: not omitted on that side."""

    id: str
    kind: str
    baseline: str | None
    candidate: str | None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "baseline": self.baseline,
                "candidate": self.candidate}  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class DisclosureChange:
    """How the candidate's disclosure differs from the baseline's for one input. Pairs are
    (baseline, candidate); ``contracts``: tools both disclose under different digests."""

    status: tuple[str, str]
    reason: tuple[str | None, str | None]
    disclosed: tuple[str, ...]
    withheld: tuple[Withheld, ...]
    contracts: tuple[str, ...]
    messages_added: tuple[str, ...]
    messages_removed: tuple[str, ...]
    omissions: tuple[OmissionChange, ...]
    tokens: tuple[Mapping[str, Any], Mapping[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            "status": {"baseline": self.status[0], "candidate": self.status[1]},
            "reason": {"baseline": self.reason[0], "candidate": self.reason[1]},
            "newlyDisclosed": list(self.disclosed),
            "newlyWithheld": [w.to_json() for w in self.withheld],
            "contractsChanged": list(self.contracts),
            "messagesAdded": list(self.messages_added),
            "messagesRemoved": list(self.messages_removed),
            "omissions": [o.to_json() for o in self.omissions],
            "tokens": {"baseline": dict(self.tokens[0]), "candidate": dict(self.tokens[1])},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordChange:
    record: RecordRef
    change: DisclosureChange

    def to_json(self) -> dict[str, Any]:
        return {**self.record.to_json(), **self.change.to_json()}


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIfSummary:
    """Counts over the considered records: ``newly_disclosed`` and ``newly_withheld`` are
    (tool, records); ``status_changes`` ("RESOLVED -> BLOCKED", records); token totals summed
    over every considered record."""

    records_changed: int
    newly_disclosed: tuple[tuple[str, int], ...]
    newly_withheld: tuple[tuple[str, int], ...]
    status_changes: tuple[tuple[str, int], ...]
    budget_changes: int
    ceiling_changes: int
    tokens_baseline: int
    tokens_candidate: int

    def to_json(self) -> dict[str, Any]:
        return {
            "recordsChanged": self.records_changed,
            "newlyDisclosed": dict(self.newly_disclosed),
            "newlyWithheld": dict(self.newly_withheld),
            "statusChanges": dict(self.status_changes),
            "budget": {
                "recordsChanged": self.budget_changes,
                "ceilingChanged": self.ceiling_changes,
                "tokensBaseline": self.tokens_baseline,
                "tokensCandidate": self.tokens_candidate,
            },
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIfReport:
    """``considered``: the ``DISCLOSED`` records of ``build`` evaluated with both builds;
    ``unusable``: records of ``build`` that could not be (with the problem)."""

    build: str
    candidate: str | None
    records: int
    considered: int
    changes: tuple[RecordChange, ...]
    unusable: tuple[tuple[RecordRef, str], ...]
    other_builds: tuple[tuple[str, int], ...]
    other_events: int
    summary: WhatIfSummary

    def to_json(self) -> dict[str, Any]:
        return {
            "build": self.build,
            "candidate": self.candidate,
            "records": self.records,
            "considered": self.considered,
            "unchanged": self.considered - len(self.changes),
            "skippedOtherBuild": sum(n for _, n in self.other_builds),
            "otherBuilds": dict(self.other_builds),
            "otherEvents": self.other_events,
            "summary": self.summary.to_json(),
            "changes": [c.to_json() for c in self.changes],
            "unusable": [{**ref.to_json(), "problem": why} for ref, why in self.unusable],
        }


# ---------------------------------------------------------------- one input


def _omissions(s: Summary) -> dict[tuple[str, str], str]:
    return {(o["id"], o["kind"]): o["reason"] for o in [*s["omitted"], *s["causes"]]}


def _outline(s: Summary) -> tuple[Any, ...]:
    """Everything but explanations."""
    return (
        s["status"],
        s["reason"],
        s["profile"],
        [(t["id"], t["contractDigest"]) for t in s["tools"]],
        s["messages"],
        [(o["id"], o["kind"], o["reason"]) for o in s["omitted"]],
        [(o["id"], o["kind"], o["reason"]) for o in s["causes"]],
        s["tokens"],
    )


def _omission_changes(base: Summary, cand: Summary) -> tuple[OmissionChange, ...]:
    before, after = _omissions(base), _omissions(cand)
    keys = [*before, *(k for k in after if k not in before)]
    return tuple(
        OmissionChange(id=i, kind=kind, baseline=before.get((i, kind)),
                       candidate=after.get((i, kind)))
        for i, kind in keys if before.get((i, kind)) != after.get((i, kind))
    )  # fmt: skip


def compare(base: Summary, cand: Summary) -> DisclosureChange | None:
    """None when the two summaries agree on everything but explanations."""
    if _outline(base) == _outline(cand):
        return None
    before = {t["id"]: t["contractDigest"] for t in base["tools"]}
    after = {t["id"]: t["contractDigest"] for t in cand["tools"]}
    omitted = _omissions(cand)
    return DisclosureChange(
        status=(base["status"], cand["status"]),
        reason=(base["reason"], cand["reason"]),
        disclosed=tuple(t for t in after if t not in before),
        withheld=tuple(
            Withheld(id=t, reason=omitted.get((t, "tool"))) for t in before if t not in after
        ),
        contracts=tuple(t for t in after if t in before and before[t] != after[t]),
        messages_added=tuple(m for m in cand["messages"] if m not in base["messages"]),
        messages_removed=tuple(m for m in base["messages"] if m not in cand["messages"]),
        omissions=_omission_changes(base, cand),
        tokens=(base["tokens"], cand["tokens"]),
    )


# ---------------------------------------------------------------- the log


@dataclass(slots=True)
class _Tally:
    disclosed: Counter[str]
    withheld: Counter[str]
    status: Counter[str]
    budget: int = 0
    ceiling: int = 0
    tokens_baseline: int = 0
    tokens_candidate: int = 0

    def add(self, base: Summary, cand: Summary, change: DisclosureChange | None) -> None:
        self.tokens_baseline += base["tokens"]["total"]
        self.tokens_candidate += cand["tokens"]["total"]
        if change is None:
            return
        self.disclosed.update(change.disclosed)
        self.withheld.update(w.id for w in change.withheld)
        if change.status[0] != change.status[1]:
            self.status[f"{change.status[0]} -> {change.status[1]}"] += 1
        self.budget += change.tokens[0] != change.tokens[1]
        self.ceiling += change.tokens[0]["ceiling"] != change.tokens[1]["ceiling"]

    def summary(self, changed: int) -> WhatIfSummary:
        return WhatIfSummary(
            records_changed=changed,
            newly_disclosed=counts(self.disclosed),
            newly_withheld=counts(self.withheld),
            status_changes=counts(self.status),
            budget_changes=self.budget,
            ceiling_changes=self.ceiling,
            tokens_baseline=self.tokens_baseline,
            tokens_candidate=self.tokens_candidate,
        )


class _Pair:
    """Both evaluations and their comparison, once per distinct input."""

    def __init__(self, baseline: Project, candidate: Project, cache_size: int) -> None:
        self.baseline = Evaluator(baseline, cache_size)
        self.candidate = Evaluator(candidate, cache_size)
        self.cache_size = cache_size
        self.cache: dict[str, tuple[Summary, Summary, DisclosureChange | None]] = {}

    def evaluate(self, record: Record) -> tuple[Summary, Summary, DisclosureChange | None] | str:
        inputs = inputs_of(record)
        if isinstance(inputs, str):
            return inputs
        key = input_key(inputs)
        found = self.cache.get(key)
        if found is None:
            base = self.baseline.evaluate(inputs, key).summary
            cand = self.candidate.evaluate(inputs, key).summary
            found = (base, cand, compare(base, cand))
            if self.cache_size > 0:
                if len(self.cache) >= self.cache_size:
                    self.cache.clear()
                self.cache[key] = found
        return found


def what_if(
    baseline_ir: Project,
    candidate_ir: Project,
    records: Iterable[Record],
    *,
    build_digest: str,
    candidate_digest: str | None = None,
    cache_size: int = CACHE_SIZE,
) -> WhatIfReport:
    """Per ``DISCLOSED`` record of ``build_digest``: what ``candidate_ir`` would have disclosed
    differently from ``baseline_ir``, given the record's objective, coordinates and
    observations."""
    pair = _Pair(baseline_ir, candidate_ir, cache_size)
    tally = _Tally(Counter(), Counter(), Counter())
    total = considered = other_events = 0
    others: Counter[str] = Counter()
    changes: list[RecordChange] = []
    unusable: list[tuple[RecordRef, str]] = []
    for record in records:
        total += 1
        if record.get("event") != DISCLOSED:
            other_events += 1
            continue
        if record.get("build") != build_digest:
            others[build_of(record)] += 1
            continue
        found = pair.evaluate(record)
        if isinstance(found, str):
            unusable.append((RecordRef.of(record), found))
            continue
        considered += 1
        tally.add(*found)
        if found[2] is not None:
            changes.append(RecordChange(record=RecordRef.of(record), change=found[2]))
    return WhatIfReport(
        build=build_digest,
        candidate=candidate_digest,
        records=total,
        considered=considered,
        changes=tuple(changes),
        unusable=tuple(unusable),
        other_builds=counts(others),
        other_events=other_events,
        summary=tally.summary(len(changes)),
    )
