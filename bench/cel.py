"""``python -m bench cel``: CEL conditions at engine speed.

``decide`` on the reference project's learner read (``inspect-context``), with no condition, a
one-clause, a two-clause and a five-clause condition on its rule (each false: the call is
allowed, every clause evaluated where CEL must), and ``disclose`` of the learner objective
without and with a rule ``when``; all in one run, their batches interleaved. Then each
expression evaluated alone by three evaluators on the same activation: seif's compiled closures
(``policy.cel.program``, what the engine runs), cel-python's interpreted runner (with
``json_to_cel`` of the activation, as the engine ran it before) and cel-expr-python (Google's
C++ runtime, ``eval(data=...)``).

Targets (issue 14): a condition adds at most 10 µs to a decision; a two-clause condition
decides within 3x of a decision without one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import celpy
import celpy.adapter

from bench.harness import Stats, measure_all
from compiler import compile_project
from policy import Call, ContextState, decide, disclose
from policy.cel.closures import MAX_ITERATIONS
from policy.cel.program import compile_program
from policy.ir import Project

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "reference/agent-tools/context-project.json"
NOW = 1_000
ARGUMENTS = {"ref": "course/data-literacy/module-2/lesson-3"}
CONDITIONS = {
    "no condition": None,
    "one clause": "size(args.ref) > 500",
    "two clauses": "size(args.ref) > 500 && context.environment == 'production'",
    "five clauses": (
        "size(args.ref) > 500 || args.ref.startsWith('admin/') || "
        "context.environment == 'production' || call.count > 2 || context.consumer == 'trial'"
    ),
}
WHEN = "context.environment != 'production' && context.consumer != 'trial'"
CONTEXT = {"objective": "learner", "consumer": "tutor-app", "environment": "staging",
           "deployment": "bench"}  # fmt: skip
ADDED_NS = 10_000
TWO_CLAUSE_RATIO = 3.0


def project(condition: str | None, when: str | None = None) -> Project:
    """The reference project with ``condition`` (and ``when``) on the learner's read rule."""
    doc = json.loads(REFERENCE.read_text())
    profile = next(p for p in doc["profiles"] if p["id"] == "learner")
    rule = next(r for r in profile["toolRules"] if r["tool"] == "inspect-context")
    if condition is not None:
        rule["conditions"] = [{"when": condition, "then": "DENY", "reason": "bench"}]
    if when is not None:
        rule["when"] = when
    return compile_project(doc)


def _observations(ir: Project) -> dict[str, Any]:
    return {t.id: {"state": "READY", "version": t.version, "contractDigest": t.contract_digest}
            for t in ir.tools}  # fmt: skip


def decider(condition: str | None) -> Callable[[], Any]:
    ir = project(condition)
    disclosure = disclose(ir, "learner", _observations(ir), context=CONTEXT)
    state = ContextState.open("ctx-bench", disclosure, 0)
    call = Call(tool="inspect-context", call_id="c1", arguments=ARGUMENTS)
    decision = decide(ir, state, call, NOW)
    if decision.outcome != "ALLOW":
        raise RuntimeError(f"{condition!r}: {decision.outcome} {decision.reason}")
    return lambda: decide(ir, state, call, NOW)


def discloser(when: str | None) -> Callable[[], Any]:
    ir = project(None, when)
    seen = _observations(ir)
    found = disclose(ir, "learner", seen, context=CONTEXT)
    if "inspect-context" not in [t.id for t in found.tools]:
        raise RuntimeError("the rule's `when` did not apply")
    return lambda: disclose(ir, "learner", seen, context=CONTEXT)


def activation() -> dict[str, Any]:
    return {"args": ARGUMENTS, "context": CONTEXT,
            "call": {"tool": "inspect-context", "callId": "c1", "count": 0}}  # fmt: skip


def evaluators(text: str) -> dict[str, Callable[[], Any]]:
    """The same expression on the same activation, by each evaluator; all must agree."""
    act = activation()
    fast = compile_program(text)
    env = celpy.Environment()
    interpreted = env.program(env.compile(text))
    out: dict[str, Callable[[], Any]] = {
        "seif celfast": lambda: fast.evaluate(act),
        "cel-python": lambda: interpreted.evaluate(
            {k: celpy.adapter.json_to_cel(v) for k, v in act.items()}
        ),
    }
    cpp = _cel_cpp(text)
    if cpp is not None:
        out["cel-expr-python"] = lambda: cpp.eval(data=act).plain_value()
    results = {name: bool(fn()) for name, fn in out.items()}
    if len(set(results.values())) != 1:
        raise RuntimeError(f"evaluators disagree on {text!r}: {results}")
    return out


def _cel_cpp(text: str) -> Any:
    try:
        from cel_expr_python import cel  # optional: measured when installed
    except ImportError:
        return None
    names = {"args": cel.Type.DYN, "context": cel.Type.DYN, "call": cel.Type.DYN}
    return cel.NewEnv(variables=names).compile(text)


def run(*, quick: bool = False) -> dict[str, Any]:
    repeats, min_time = (3, 0.001) if quick else (31, 0.02)
    timed: dict[tuple[str, str], Callable[[], Any]] = {
        (f"decide, {name}", "seif"): decider(text) for name, text in CONDITIONS.items()
    }
    timed[("disclose learner, no when", "seif")] = discloser(None)
    timed[("disclose learner, a when", "seif")] = discloser(WHEN)
    for name, text in [*((n, t) for n, t in CONDITIONS.items() if t), ("when", WHEN)]:
        for impl, fn in evaluators(text).items():
            timed[(f"evaluate {name}", impl)] = fn
    timed[("evaluate worst case", "seif celfast")] = worst_case()
    measured = measure_all(timed, repeats=repeats, min_time=min_time)
    return report(measured)


WORST = "args.a.all(x, args.a.exists(y, y < 0) == false)"
"""Two nested macros over arguments that use the whole step budget, no short cut: the most an
accepted expression can cost."""


def worst_case() -> Callable[[], Any]:
    from policy.cel.expression import compile_expression, evaluate

    expression = compile_expression(WORST, "call")
    side = int(MAX_ITERATIONS**0.5) - 1  # side + side**2 steps: just inside the budget
    act = {"args": {"a": list(range(side))}}
    if evaluate(expression, act).value is not True:
        raise RuntimeError("the worst case did not run to its end")
    return lambda: evaluate(expression, act)


def report(measured: dict[tuple[str, str], Stats]) -> dict[str, Any]:
    rows = [{"name": name, "impl": impl, **stat.to_json()}
            for (name, impl), stat in measured.items()]  # fmt: skip
    base = measured[("decide, no condition", "seif")].median_ns
    added = {name: measured[(f"decide, {name}", "seif")].median_ns - base
             for name in CONDITIONS if name != "no condition"}  # fmt: skip
    worst = measured[("evaluate worst case", "seif celfast")].median_ns
    two = measured[("decide, two clauses", "seif")].median_ns / base
    ratios: dict[str, float] = {"decide two clauses / no condition": two}
    for name in (*[n for n in CONDITIONS if n != "no condition"], "when"):
        seif = measured[(f"evaluate {name}", "seif celfast")].median_ns
        for impl in ("cel-python", "cel-expr-python"):
            if (f"evaluate {name}", impl) in measured:
                other = measured[(f"evaluate {name}", impl)].median_ns
                ratios[f"{impl} / seif, evaluate {name}"] = other / seif
    met = all(v <= ADDED_NS for v in added.values()) and two <= TWO_CLAUSE_RATIO
    notes = [f"a condition adds {v / 1000:.2f} µs to decide ({name})" for name, v in added.items()]
    notes.append(f"two clauses decide at {two:.2f}x no condition (target <= {TWO_CLAUSE_RATIO}x)")
    notes.append(f"targets {'met' if met else 'NOT met'} (<= {ADDED_NS / 1000:g} µs added)")
    notes.append(f"the worst case an accepted condition reaches: {worst / 1e6:.1f} ms")
    return {"rows": rows, "ratios": ratios, "added_ns": added, "target_met": met, "notes": notes}
