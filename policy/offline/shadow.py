"""Shadow comparison: what a candidate build would decide on the inputs the promoted one saw.

The runtime (``servers.runtime.shadow``) hands every decision it logs to a :class:`Shadow` comparer
along with the engine's inputs: a resolution's objective, coordinates and observations, or a call
with the context's state. The comparer evaluates the candidate on the same inputs, purely, and
returns the difference, or None when the candidate would decide the same. A disclosure is compared
exactly as :func:`policy.offline.whatif.what_if` compares a recorded one (the same
:func:`policy.offline.whatif.compare` of the same summaries), so a shadow run and a what-if over its
log agree record for record. A call is compared on its outcome and reason code.

:func:`report` summarises a log's ``SHADOW`` records against the decision records they shadow
(those carrying ``shadow``: the candidate's digest): what ``seif shadow report`` prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from policy.engine.decision import Decision, decide
from policy.engine.disclosure import Disclosure, disclose
from policy.engine.state import Call, ContextState
from policy.ir import Project
from policy.offline.recorded import Inputs, Summary, counts, disclosure_summary, input_key
from policy.offline.whatif import compare

SHADOW = "SHADOW"
DISCLOSURE, CALL, FAILED = "disclosure", "call", "failed"
KINDS = (DISCLOSURE, CALL, FAILED)
"""The kinds of ``SHADOW`` record: a disclosure or a call the candidate would decide
otherwise, or a comparison that raised (``error``: the exception's type, nothing else)."""
SHADOWED_EVENTS = frozenset({"DISCLOSED", "DENIED", "INTENT"})
"""The decision records a shadow compares (a duplicate answers from the first call's record)."""
CACHE_SIZE = 4096
"""Distinct inputs, and contexts, whose candidate disclosure a comparer remembers."""


@dataclass(frozen=True, slots=True)
class CallOutcome:
    outcome: str
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "reason": self.reason}

    @property
    def label(self) -> str:
        return self.outcome if self.reason is None else f"{self.outcome} {self.reason}"


@dataclass(frozen=True, slots=True)
class CallChange:
    """A call the candidate decides otherwise: (baseline, candidate) outcome and reason."""

    tool: str
    call_id: str
    baseline: CallOutcome
    candidate: CallOutcome

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "callId": self.call_id,
            "baseline": self.baseline.to_json(),
            "candidate": self.candidate.to_json(),
        }


class Shadow:
    """Compares decisions with a candidate IR. Keeps the candidate's disclosures, per distinct
    input and per context, bounded (each cache starts over when full). Not thread-safe: one
    thread compares (the runtime's shadow worker)."""

    def __init__(self, candidate: Project, cache_size: int = CACHE_SIZE) -> None:
        self.ir = candidate
        self.cache_size = cache_size
        self._by_input: dict[str, tuple[Disclosure, Summary]] = {}
        self._by_context: dict[str, Disclosure] = {}
        self._changes: dict[str, tuple[Summary, Mapping[str, Any] | None]] = {}

    def disclosed(
        self, inputs: Inputs, context_ref: str | None = None, key: str | None = None
    ) -> tuple[Disclosure, Summary]:
        """The candidate's disclosure of ``inputs`` (whose :func:`input_key` is ``key``, when
        known) and its summary, remembered for ``context_ref``, whose calls are then decided
        on it."""
        key = input_key(inputs) if key is None else key
        found = self._by_input.get(key)
        if found is None:
            d = disclose(
                self.ir,
                inputs.objective,
                inputs.observations,
                context=inputs.coordinates,
                principal=inputs.principal,
            )
            found = (d, disclosure_summary(d))
            _keep(self._by_input, key, found, self.cache_size)
        if context_ref is not None:
            _keep(self._by_context, context_ref, found[0], self.cache_size)
        return found

    def resolution(
        self, inputs: Inputs, baseline: Summary, context_ref: str | None = None
    ) -> Mapping[str, Any] | None:
        """How the candidate's disclosure differs from ``baseline`` (the promoted build's summary of
        the same inputs): :meth:`policy.offline.whatif.DisclosureChange.to_json`, or None. Equal
        inputs with the very same ``baseline`` object give the very same answer (kept:
        its encoding can be kept with it)."""
        key = input_key(inputs)
        found = self._changes.get(key)
        if found is not None and found[0] is baseline:
            if context_ref is not None:
                self.disclosed(inputs, context_ref, key)
            return found[1]
        change = compare(baseline, self.disclosed(inputs, context_ref, key)[1])
        answer = None if change is None else change.to_json()
        _keep(self._changes, key, (baseline, answer), self.cache_size)
        return answer

    def call(
        self,
        state: ContextState | None,
        inputs: Callable[[], Inputs] | None,
        call: Call,
        now: int,
        baseline: Decision,
        principal: Mapping[str, Any] | None = None,
    ) -> CallChange | None:
        """How the candidate would decide ``call`` on ``state`` (the context as the promoted
        build sees it: its history is kept, its disclosure is the candidate's of the context's
        recorded resolution inputs, which ``inputs`` reads when the comparer does not keep that
        disclosure already) otherwise than ``baseline``; None if alike."""
        candidate_state = None
        if state is not None:
            disclosure = self._by_context.get(state.context_ref)
            if disclosure is None:
                if inputs is None:  # read only for a context not seen resolved
                    raise ValueError("a context's resolution inputs are needed to shadow its call")
                disclosure = self.disclosed(inputs(), state.context_ref)[0]
            candidate_state = replace(state, disclosure=disclosure)
        decision = decide(self.ir, candidate_state, call, now, principal)
        before = CallOutcome(baseline.outcome, baseline.reason)
        after = CallOutcome(decision.outcome, decision.reason)
        if before == after:
            return None
        return CallChange(baseline.tool, call.call_id, before, after)


def _keep(cache: dict[str, Any], key: str, value: Any, size: int) -> None:
    if size <= 0:
        return
    if len(cache) >= size and key not in cache:
        cache.clear()
    cache[key] = value


# ---------------------------------------------------------------- the report


@dataclass
class _Run:
    """One candidate's tallies over a log."""

    compared: Counter[str] = field(default_factory=Counter)
    differing: Counter[str] = field(default_factory=Counter)
    disclosed: Counter[str] = field(default_factory=Counter)
    withheld: Counter[str] = field(default_factory=Counter)
    withheld_reasons: Counter[str] = field(default_factory=Counter)
    transitions: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    tokens: int = 0

    def add_difference(self, record: Mapping[str, Any]) -> None:
        kind = record.get("kind")
        self.differing[str(kind)] += 1
        if kind == DISCLOSURE:
            self._disclosure(record.get("disclosure"))
        elif kind == CALL:
            self._call(record.get("call"))
        elif kind == FAILED:
            self.errors[str(record.get("error"))] += 1

    def _disclosure(self, change: Any) -> None:
        if not isinstance(change, Mapping):
            return
        self.disclosed.update(str(t) for t in change.get("newlyDisclosed") or ())
        for w in change.get("newlyWithheld") or ():
            if isinstance(w, Mapping):
                self.withheld[str(w.get("id"))] += 1
                self.withheld_reasons[str(w.get("reason") or "NOT_INCLUDED")] += 1
        tokens = change.get("tokens")
        if isinstance(tokens, Mapping) and tokens.get("baseline") != tokens.get("candidate"):
            self.tokens += 1

    def _call(self, change: Any) -> None:
        if not isinstance(change, Mapping):
            return
        sides = [change.get("baseline"), change.get("candidate")]
        labels = [_label(s) for s in sides]
        self.transitions[f"{labels[0]} -> {labels[1]}"] += 1
        for reason in {s.get("reason") for s in sides if isinstance(s, Mapping)}:
            if isinstance(reason, str):
                self.reasons[reason] += 1

    def to_json(self, candidate: str) -> dict[str, Any]:
        failed = self.differing[FAILED]
        compared = sum(self.compared.values())
        return {
            "candidate": candidate,
            "decisions": compared,
            "compared": max(0, compared - failed),
            "differ": self.differing[DISCLOSURE] + self.differing[CALL],
            "failed": failed,
            "byEvent": dict(counts(self.compared)),
            "disclosures": {
                "differ": self.differing[DISCLOSURE],
                "newlyDisclosed": dict(counts(self.disclosed)),
                "newlyWithheld": dict(counts(self.withheld)),
                "withheldBecause": dict(counts(self.withheld_reasons)),
                "tokensChanged": self.tokens,
            },
            "calls": {
                "differ": self.differing[CALL],
                "transitions": dict(counts(self.transitions)),
                "byReason": dict(counts(self.reasons)),
            },
            "errors": dict(counts(self.errors)),
        }


def _label(side: Any) -> str:
    if not isinstance(side, Mapping):
        return "?"
    return CallOutcome(str(side.get("outcome")), side.get("reason")).label


def report(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per candidate found in the log: the decisions it shadowed (records carrying ``shadow``),
    how many it compared (all but those whose comparison failed), how many it would have
    decided otherwise, per tool how often it would have disclosed or withheld it, and per
    reason code how often a call would have been decided otherwise. ``records``: every record
    of the log; ``unshadowed``: the decision records no shadow compared (no shadow was loaded,
    or its backlog was full)."""
    runs: dict[str, _Run] = {}
    total = unshadowed = 0
    for record in records:
        total += 1
        event = record.get("event")
        if event == SHADOW:
            candidate = record.get("candidate")
            runs.setdefault(str(candidate), _Run()).add_difference(record)
        elif event in SHADOWED_EVENTS:
            marked = record.get("shadow")
            if type(marked) is str:
                runs.setdefault(marked, _Run()).compared[str(event)] += 1
            else:
                unshadowed += 1
    return {
        "records": total,
        "unshadowed": unshadowed,
        "candidates": [run.to_json(digest) for digest, run in sorted(runs.items())],
    }
