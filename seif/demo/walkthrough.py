"""`make run`: the main job on the reference project with the embedded defaults.

Validates ``reference/agent-tools/context-project.json``, runs its tests with the engine, writes
its build to ``out/reference-build`` and prints the build digest and every contract digest, then
resolves both objectives and decides a few calls to show what the engine says and why.
"""

from __future__ import annotations

import sys
from pathlib import Path

from compiler import CompileError, compile_project, load_build, write_build
from policy import Call, ContextState, Decision, decide, disclose, run_tests
from policy.diagnostic import render
from policy.engine.testing import test_fixtures
from policy.ir import Project
from policy.json.strict import dumps

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "reference" / "agent-tools" / "context-project.json"
OUT = ROOT / "out" / "reference-build"
NOW = 1_790_000_000_000  # a fixed instant (ms): the demo is deterministic


def main() -> int:
    try:
        ir = compile_project(REFERENCE)
    except CompileError as exc:
        for d in exc.diagnostics:
            print(render(d, str(REFERENCE)))
        return 1
    print(f"valid: {REFERENCE.relative_to(ROOT)}")
    report = run_tests(ir)
    print(
        f"tests: context: {report.figure('context')} passed, tools: {report.figure('tools')} passed"
    )
    if not report.passed:
        return 1
    build = write_build(ir, OUT)
    assert load_build(OUT).digest == build.digest
    print(f"build: {build.digest} ({build.format}, requires {build.requires_runtime})")
    print(f"       written to {OUT.relative_to(ROOT)}")
    for tool in ir.tools:
        print(f"tool:  {tool.id} {tool.version} {tool.contract_digest}")
    print(
        "\nA profile says which context messages and tools an objective may receive; a\n"
        "disclosure is what it receives now, under its token budget and the tools' availability;\n"
        "an approval is a person's yes to one exact call (context, tool, call id, arguments)."
    )
    show_decisions(ir)
    from seif.demo.runtime import run  # noqa: PLC0415  # the server stack loads only here

    code = run(OUT)
    print(
        "\nNext: `make run` proves a whole delivery (bundle, approval server, SDK, replay);\n"
        "docs/runtime-walkthrough.md drives the runtime with curl; docs/language.md writes this\n"
        "project in the .seif language (`seif convert reference/agent-tools/context-project.json "
        "--to seif`)."
    )
    return code


def show_decisions(ir: Project) -> None:
    current = test_fixtures(ir, next(t for t in ir.tests if t.fixtures == "current"))
    arguments = {
        "target": "course/data-literacy/module-2/lesson-3",
        "kind": "clarify",
        "summary": "Define the median before using it.",
    }
    for objective in ("learner", "authoring"):
        d = disclose(ir, objective, current)
        print(
            f"\n{objective}: {d.status}, tools {[t.id for t in d.tools]}, "
            f"tokens {d.tokens.total}/{d.tokens.ceiling} (estimated)"
        )
        state = ContextState.open(f"demo-{objective}", d, NOW)
        call = Call(tool="propose-change", call_id="c1", arguments=arguments)
        show(decide(ir, state, call, NOW + 1000))
        if objective != "authoring":
            continue
        state = state.record_approval(
            "a1",
            tool=call.tool,
            call_id=call.call_id,
            fingerprint=state.fingerprint(arguments),
            now=NOW + 2000,
        )
        approved = Call(tool="propose-change", call_id="c1", arguments=arguments, approval_id="a1")
        decision = decide(ir, state, approved, NOW + 3000)
        show(decision, "with the operator's approval")
        assert decision.fingerprint is not None
        state = state.record_dispatch("c1", call.tool, decision.fingerprint)
        show(decide(ir, state, approved, NOW + 4000), "the same call again")


def show(decision: Decision, note: str = "") -> None:
    why = decision.explanation.to_json() if decision.explanation else None
    reason = f" ({decision.reason})" if decision.reason else ""
    print(f"  propose-change{' (' + note + ')' if note else ''} -> {decision.outcome}{reason}")
    print(f"    why: {dumps(why)}")


if __name__ == "__main__":
    sys.exit(main())
