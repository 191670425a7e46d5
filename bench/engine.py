"""The engine per decision: ``disclose`` and ``decide`` on the reference project, against cedarpy.

seif: ``disclose`` of both objectives of ``reference/agent-tools/context-project.json`` under
READY observations of the current contracts, and ``decide`` on five reference calls (their
arguments are those of the project's tests, as plain ``dict``s, as a runtime gets them from JSON)
against a context opened from that disclosure. ``decide`` does all it does per call: the context
and expiry check, the disclosure check, the argument fingerprint (canonical CBOR + BLAKE3) and the
duplicate/conflict lookup, argument validation (and the error walk when invalid), the call limit,
the approval binding, and the explanation. The states are immutable and no dispatch is recorded,
so every timed call decides the same first call.

cedarpy: the same include/exclude rules and the write-approval rule written in Cedar (one policy
per tool rule of the project, plus one ``forbid`` for writes without approval), the principal
being the profile, the action ``Action::"call"``, the resource the tool with its ``effect``, the
context ``{"approved": bool}``; uids are given as ``{"type", "id"}`` (cedarpy would otherwise
parse ``Type::"id"`` text per call). Two ways: ``is_authorized`` given the policy text and the
entities JSON text on every call (both parsed per call), and given a ``PolicySet`` and an
``Entities`` parsed once. Both include cedarpy's binding: the context dumped to JSON, the
result loaded from JSON into an ``AuthzResult`` (whose ``metrics`` are reported per case).
Cedar does not see arguments: it neither validates nor fingerprints them, and the approval is
a boolean the caller asserts, where seif checks an approval bound to the exact context, tool,
callId and argument fingerprint, unexpired.

Rows are per decision. ``ratios`` are cedar time / seif time (above 1: seif is faster).
``python -m bench.engine --profile`` prints a cProfile of ``decide`` per case.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cedarpy

from bench.harness import Stats, measure_all, ratio
from compiler import compile_project
from policy import Call, ContextState, decide, disclose
from policy.ir import Project
from policy.json.value import thaw

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "reference/agent-tools/context-project.json"
TARGET_NS = 10_000
"""The target for one ``decide``: a median of 10 µs."""

NOW = 1_000
"""Decision time, ms since the epoch: one second after the context (and approval) opened at 0."""
APPROVAL_ID = "approval-1"

# (case, objective, callId of the reference test call, approval recorded, approvalId sent,
#  expected seif (outcome, reason), expected cedar decision)
CASES: tuple[tuple[str, str, str, bool, bool, tuple[str, str | None], str], ...] = (
    ("allowed read", "learner", "learner-inspect-1", False, False, ("ALLOW", None), "Allow"),
    ("undisclosed tool", "learner", "learner-propose-1", False, False,
     ("DENY", "TOOL_NOT_DISCLOSED"), "Deny"),
    ("invalid arguments", "learner", "bad-depth", False, False,
     ("DENY", "ARGUMENTS_INVALID"), "Allow"),
    ("approved write", "authoring", "author-proposal-1", True, True, ("ALLOW", None), "Allow"),
    ("approval required", "authoring", "author-proposal-1", False, False,
     ("DENY", "APPROVAL_REQUIRED"), "Deny"),
)  # fmt: skip

COMPUTES = {
    "seif decide": (
        "context exists and is unexpired; tool disclosed in the context; canonical CBOR + "
        "BLAKE3 fingerprint of the arguments and duplicate/conflict lookup by callId; argument "
        "validation against the tool's compiled parameter schema (plus the error walk with "
        "pointers when invalid); CEL conditions (none in this project); maxCalls; approval "
        "bound to this context, tool, callId and fingerprint, unexpired; an explanation "
        "(profile rule and source pointer)"
    ),
    "cedarpy text": (
        "parse the policy text and the entities JSON text, then evaluate the principal/action/"
        "resource/context request; arguments are not seen (no validation, no fingerprint, no "
        "duplicate or call-limit state); approval is a caller-asserted context boolean; "
        "plus the binding's JSON round trip (context dumped, result loaded)"
    ),
    "cedarpy prepared": (
        "evaluate the request against a PolicySet and an Entities parsed once; otherwise the "
        "same as cedarpy text"
    ),
}


def observations(ir: Project) -> dict[str, dict[str, str]]:
    """READY observations of the current contracts, in the shape a runtime reports them."""
    return {t.id: {"state": "READY", "version": t.version, "contractDigest": t.contract_digest}
            for t in ir.tools}  # fmt: skip


def reference_call(ir: Project, call_id: str) -> tuple[str, Any]:
    """The tool and plain-JSON arguments of the reference test call with this callId."""
    for test in ir.tests:
        calls = test.expect.tools.calls if test.expect.tools else ()
        for call in calls:
            if call.call_id == call_id:
                return call.tool, thaw(call.arguments)
    raise LookupError(f"no reference test call with callId {call_id!r}")


# ---------------------------------------------------------------- Cedar


def cedar_policies(ir: Project) -> str:
    """The project's tool rules and write approval in Cedar: one policy per tool rule."""
    out = []
    for p, profile in enumerate(ir.profiles):
        for r, rule in enumerate(profile.tool_rules):
            effect = "permit" if rule.participation == "include" else "forbid"
            out.append(
                f'@id("/profiles/{p}/toolRules/{r}")\n'
                f'{effect} (principal == Profile::"{profile.id}", action == Action::"call", '
                f'resource == Tool::"{rule.tool}");'
            )
    out.append(
        '@id("write-approval")\n'
        'forbid (principal, action == Action::"call", resource)\n'
        '  when { resource.effect == "write" }\n'
        "  unless { context has approved && context.approved };"
    )
    return "\n".join(out) + "\n"


def cedar_entities(ir: Project) -> list[dict[str, Any]]:
    profiles = [{"uid": {"type": "Profile", "id": p.id}, "attrs": {}, "parents": []}
                for p in ir.profiles]  # fmt: skip
    tools = [{"uid": {"type": "Tool", "id": t.id}, "attrs": {"effect": t.effect}, "parents": []}
             for t in ir.tools]  # fmt: skip
    return profiles + tools


def cedar_request(objective: str, ir: Project, tool: str, approved: bool) -> dict[str, Any]:
    """The request with ``{"type", "id"}`` uids: cheaper for cedarpy than ``Type::"id"`` text,
    which it parses per call."""
    profile = ir.objective_by_id[objective].profile
    return {
        "principal": {"type": "Profile", "id": profile},
        "action": {"type": "Action", "id": "call"},
        "resource": {"type": "Tool", "id": tool},
        "context": {"approved": approved},
    }


# ---------------------------------------------------------------- the cases


def prepare() -> dict[str, Any]:
    """Compile the project, resolve both objectives, build every case for both engines."""
    ir = compile_project(REFERENCE)
    seen = observations(ir)
    disclosures = {o.id: disclose(ir, o.id, seen) for o in ir.objectives}
    policy_text = cedar_policies(ir)
    entities_text = json.dumps(cedar_entities(ir))
    policy_set = cedarpy.PolicySet.from_str(policy_text)
    entities = cedarpy.Entities.from_json_str(entities_text)
    cases = []
    for name, objective, call_id, recorded, send, expected, cedar_expected in CASES:
        tool, arguments = reference_call(ir, call_id)
        state = ContextState.open(f"ctx-{objective}", disclosures[objective], 0)
        if recorded:
            state = state.record_approval(
                APPROVAL_ID,
                tool=tool,
                call_id=call_id,
                fingerprint=state.fingerprint(arguments),
                now=0,
            )
        call = Call(
            tool=tool,
            call_id=call_id,
            arguments=arguments,
            approval_id=APPROVAL_ID if send else None,
        )
        request = cedar_request(objective, ir, tool, approved=recorded and send)
        cases.append({"name": name, "objective": objective, "state": state, "call": call,
                      "expected": expected, "cedar_expected": cedar_expected,
                      "request": request})  # fmt: skip
    return {"ir": ir, "observations": seen, "disclosures": disclosures, "cases": cases,
            "policy_text": policy_text, "entities_text": entities_text,
            "policy_set": policy_set, "entities": entities}  # fmt: skip


def discloser(ir: Project, objective: str, seen: dict[str, Any]) -> Callable[[], Any]:
    return lambda: disclose(ir, objective, seen)


def seif_decider(ir: Project, case: dict[str, Any]) -> Callable[[], Any]:
    state, call = case["state"], case["call"]
    return lambda: decide(ir, state, call, NOW)


def cedar_deciders(prepared: dict[str, Any], case: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    request = case["request"]
    text, entities_text = prepared["policy_text"], prepared["entities_text"]
    policy_set, entities = prepared["policy_set"], prepared["entities"]
    authorize = cedarpy.is_authorized
    return {
        "cedarpy text": lambda: authorize(request, text, entities_text),
        "cedarpy prepared": lambda: authorize(request, policy_set, entities),
    }


def outcomes(prepared: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What each engine decided for each case, and where that differs from the expectation."""
    ir, found, mismatches = prepared["ir"], {}, []
    for case in prepared["cases"]:
        decision = seif_decider(ir, case)()
        results = {impl: fn() for impl, fn in cedar_deciders(prepared, case).items()}
        cedar = {impl: result.decision.value for impl, result in results.items()}
        diagnostics = results["cedarpy prepared"].diagnostics
        ids = diagnostics.id_annotations_by_reason
        name = case["name"]
        found[name] = {
            "objective": case["objective"], "tool": case["call"].tool,
            "callId": case["call"].call_id,
            "seif": {"outcome": decision.outcome, "reason": decision.reason,
                     "approvalRequired": decision.approval_required,
                     "errors": len(decision.errors)},
            "expected": {"outcome": case["expected"][0], "reason": case["expected"][1]},
            **cedar, "cedar expected": case["cedar_expected"],
            "cedar reasons": [ids.get(r, r) for r in diagnostics.reasons],
            "cedar metrics (prepared, one call)": {
                k: v for k, v in results["cedarpy prepared"].metrics.items()
                if k.endswith("_micros")},
        }  # fmt: skip
        if (decision.outcome, decision.reason) != case["expected"]:
            mismatches.append(f"seif {name}: {decision.outcome} {decision.reason}, expected "
                              f"{case['expected'][0]} {case['expected'][1]}")  # fmt: skip
        mismatches += [f"{impl} {name}: {got}, expected {case['cedar_expected']}"
                       for impl, got in cedar.items() if got != case["cedar_expected"]]  # fmt: skip
    for objective, disclosure in prepared["disclosures"].items():
        if not disclosure.resolved:
            mismatches.append(f"disclose {objective}: {disclosure.status} {disclosure.reason}")
    return found, mismatches


# ---------------------------------------------------------------- the run


def run(*, quick: bool = False) -> dict[str, Any]:
    prepared = prepare()
    ir, seen = prepared["ir"], prepared["observations"]
    found, mismatches = outcomes(prepared)
    repeats, min_time = (3, 0.001) if quick else (31, 0.02)
    timed: dict[tuple[str, str], Callable[[], Any]] = {
        (f"disclose {objective}", "seif"): discloser(ir, objective, seen)
        for objective in prepared["disclosures"]
    }
    for case in prepared["cases"]:
        deciders = {"seif": seif_decider(ir, case), **cedar_deciders(prepared, case)}
        timed |= {(f"decide {case['name']}", impl): fn for impl, fn in deciders.items()}
    measured = measure_all(timed, repeats=repeats, min_time=min_time)
    rows = [{"name": name, "impl": impl, **stat.to_json()}
            for (name, impl), stat in measured.items()]  # fmt: skip
    throughput = {name: round(1e9 / stat.median_ns)
                  for (name, impl), stat in measured.items() if impl == "seif"}  # fmt: skip
    disclosed = {objective: {"status": disclosure.status,
                             "tools": [t.id for t in disclosure.tools],
                             "messages": len(disclosure.messages),
                             "tokens": disclosure.tokens.to_json()}
                 for objective, disclosure in prepared["disclosures"].items()}  # fmt: skip
    stats = {(name.removeprefix("decide "), impl): stat
             for (name, impl), stat in measured.items() if name.startswith("decide ")}  # fmt: skip
    target = {name: {"median_ns": round(stats[(name, "seif")].median_ns, 1),
                     "within": stats[(name, "seif")].median_ns <= TARGET_NS}
              for name in found}  # fmt: skip
    return {
        "source": str(REFERENCE.relative_to(REPO)),
        "disclosures": disclosed,
        "outcomes": found,
        "mismatches": mismatches,
        "computes": COMPUTES,
        "cedar_policies": prepared["policy_text"],
        "rows": rows,
        "throughput_per_s": throughput,
        "decide_target": {"median_ns": TARGET_NS, "cases": target},
        "ratios": ratios(stats),
        "notes": notes(found, mismatches, target),
    }


def ratios(stats: dict[tuple[str, str], Stats]) -> dict[str, float]:
    out = {}
    for (name, impl), stat in stats.items():
        if impl != "seif":
            out[f"{impl}/seif decide, {name}"] = round(ratio(stat, stats[(name, "seif")]), 2)
    return out


def notes(found: dict[str, Any], mismatches: list[str], target: dict[str, Any]) -> list[str]:
    out = [
        f"{REFERENCE.name}; disclose is per resolution (READY observations of the current "
        "contracts); decide is per call; ratios are cedar time / seif time (>1: seif faster)",
        "Cedar does NOT validate arguments, fingerprint them, track duplicates or call limits, "
        "or bind approvals to a call: it evaluates include/exclude per profile and a "
        "write-needs-approved-boolean rule; seif's decide does all of these",
        "cedar 'invalid arguments' decides "
        f"{found['invalid arguments']['cedarpy prepared']} (it cannot see the arguments); "
        "seif denies it ARGUMENTS_INVALID",
    ]
    within = ", ".join(f"{name} {'yes' if t['within'] else 'no'} ({t['median_ns'] / 1000:.1f} µs)"
                       for name, t in target.items())  # fmt: skip
    out.append(f"decide median within the {TARGET_NS / 1000:.0f} µs target: {within}")
    out += [f"MISMATCH: {m}" for m in mismatches]
    return out


# ---------------------------------------------------------------- profiling


def profile(loops: int = 20_000, top: int = 12) -> None:
    """Print a cProfile of ``decide`` for each case (internal time, top entries)."""
    import cProfile
    import pstats

    prepared = prepare()
    for case in prepared["cases"]:
        fn = seif_decider(prepared["ir"], case)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(loops):
            fn()
        profiler.disable()
        print(f"== decide {case['name']} ({loops} calls)")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    if "--profile" in sys.argv[1:]:
        profile()
    else:
        print("python -m bench engine [--json] [--quick]; python -m bench.engine --profile")
