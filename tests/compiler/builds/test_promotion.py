"""Promotion: a candidate keeps every obligation of its baseline, or `PROMOTION_BLOCKED`.

Unit tests of :func:`broken_obligations` change one thing of the reference project each (the
candidate's own tests need not pass there: only the obligations are compared). The CLI tests
promote through a registry, where the candidate's tests are rerun, and check the append-only,
tamper-evident history.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from compiler.builds.build import load_build
from compiler.builds.promotion import BLOCKED, broken_obligations
from compiler.builds.registry import HISTORY, Registry
from policy.engine.testing import run_tests
from policy.json.digest import build_digest
from policy.json.strict import loads
from tests.support.release_support import (
    Doc,
    build_dir,
    find_test,
    project,
    reference_doc,
    run,
    run_json,
    variant,
)

Cap = pytest.CaptureFixture[str]
GUARD = "learner-never-sees-proposals"
READY_PROPOSE = {
    "state": "READY",
    "version": "1.0.0",
    "contractDigest": "sha256:a02b9923039deb14a3ebc5207bf785dadfba598374e509fe46b8b7619ce1bdef",
}


def broken(doc: Doc) -> list[tuple[str, str]]:
    found = broken_obligations(project(reference_doc()), project(doc))
    assert all(d.code == BLOCKED for d in found)
    return [(d.pointer or "", d.message) for d in found]


def calls(doc: Doc, test_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = find_test(doc, test_id)["expect"]["tools"]["calls"]
    return found


# Each kind of weakening, alone.
def test_the_reference_keeps_its_own_obligations() -> None:
    assert broken(reference_doc()) == []


def test_a_missing_test() -> None:
    doc = variant(lambda d: d["tests"].pop(1))
    assert broken(doc) == [("/tests/1", "test `learner-sees-reviewed-context-only` is missing")]


def test_the_learner_guard_dropped() -> None:
    doc = variant(lambda d: d["tests"].pop(0))
    assert broken(doc) == [("/tests/0", f"test `{GUARD}` is missing")]


def test_a_removed_tool_exclude() -> None:
    doc = variant(lambda d: find_test(d, GUARD)["expect"]["tools"].pop("exclude"))
    assert broken(doc) == [
        (
            "/tests/0/expect/tools/exclude/0",
            f"test `{GUARD}`: the exclusion of tool `propose-change` was removed",
        )
    ]


def test_a_removed_context_exclude() -> None:
    def change(d: Doc) -> None:
        find_test(d, "learner-sees-reviewed-context-only")["expect"]["context"]["exclude"].pop(2)

    assert broken(variant(change)) == [
        (
            "/tests/1/expect/context/exclude/2",
            "test `learner-sees-reviewed-context-only`: the exclusion of message "
            "`authoring-style-guide` was removed",
        )
    ]


def test_a_removed_deny_call() -> None:
    doc = variant(lambda d: calls(d, "inspect-context-arguments-are-validated").pop(1))
    assert broken(doc) == [
        (
            "/tests/5/expect/tools/calls/1",
            "test `inspect-context-arguments-are-validated`: call 2 `bad-depth` of "
            "`inspect-context` (DENY ARGUMENTS_INVALID) was removed",
        )
    ]


def test_a_deny_flipped_to_allow() -> None:
    def change(d: Doc) -> None:
        call = calls(d, "inspect-context-call-limit")[4]
        call["expect"] = "ALLOW"
        del call["reason"]

    assert broken(variant(change)) == [
        (
            "/tests/7/expect/tools/calls/4",
            "test `inspect-context-call-limit`: call 5 `read-4` of `inspect-context` flipped "
            "from DENY to ALLOW",
        )
    ]


def test_a_deny_whose_reason_changed() -> None:
    doc = variant(lambda d: calls(d, GUARD)[1].__setitem__("reason", "APPROVAL_REQUIRED"))
    assert broken(doc) == [
        (
            "/tests/0/expect/tools/calls/1",
            f"test `{GUARD}`: call 2 `learner-propose-2` of `propose-change` now expects "
            "`DENY APPROVAL_REQUIRED`, not `DENY TOOL_NOT_DISCLOSED`",
        )
    ]


def test_a_deny_whose_reason_was_dropped() -> None:
    doc = variant(lambda d: calls(d, "authoring-one-proposal-per-context")[1].pop("reason"))
    assert broken(doc) == [
        (
            "/tests/4/expect/tools/calls/1",
            "test `authoring-one-proposal-per-context`: call 2 `proposal-a` of `propose-change` "
            "now expects `DENY`, not `DENY CALL_CONFLICT`",
        )
    ]


def test_a_deny_call_with_other_arguments_is_another_call() -> None:
    doc = variant(lambda d: calls(d, GUARD)[0]["arguments"].__setitem__("kind", "clarify"))
    assert [p for p, _ in broken(doc)] == ["/tests/0/expect/tools/calls/0"]


def test_a_guard_no_longer_a_guard() -> None:
    doc = variant(lambda d: find_test(d, "authoring-discloses-proposal-tool").pop("guard"))
    assert broken(doc) == [
        ("/tests/12/guard", "test `authoring-discloses-proposal-tool` is no longer a guard")
    ]


def test_a_guard_keeps_its_includes_and_allowed_calls() -> None:
    def change(d: Doc) -> None:
        test = find_test(d, "authoring-discloses-proposal-tool")
        test["expect"]["tools"]["include"].remove("propose-change")
        test["expect"]["tools"]["calls"].pop(0)

    assert broken(variant(change)) == [
        (
            "/tests/12/expect/tools/include/2",
            "test `authoring-discloses-proposal-tool`: the inclusion of tool `propose-change` "
            "was removed",
        ),
        (
            "/tests/12/expect/tools/calls/0",
            "test `authoring-discloses-proposal-tool`: call 1 `author-read-1` of "
            "`inspect-context` (ALLOW) was removed",
        ),
    ]


def test_a_guard_keeps_its_resolution_and_causes() -> None:
    def change(d: Doc) -> None:
        test = find_test(d, "learner-blocked-without-inspect-context")
        test["guard"] = True

    base = variant(change)

    def weaken(d: Doc) -> None:
        change(d)
        find_test(d, "learner-blocked-without-inspect-context")["expect"]["causes"] = []

    found = broken_obligations(project(base), project(variant(weaken)))
    assert [(d.pointer, d.message) for d in found] == [
        (
            "/tests/9/expect/causes/0",
            "test `learner-blocked-without-inspect-context`: the cause `TOOL_UNAVAILABLE` was "
            "removed",
        )
    ]


def test_a_test_moved_to_another_objective() -> None:
    def change(d: Doc) -> None:
        find_test(d, "inspect-context-call-limit")["objective"] = "authoring"

    assert broken(variant(change)) == [
        (
            "/tests/7/objective",
            "test `inspect-context-call-limit` now checks objective `authoring`, not `learner`",
        )
    ]


def test_a_test_moved_to_other_coordinates() -> None:
    """A guard of production moved to staging no longer checks production: the candidate could
    disclose the tool in production and still pass it."""

    def at(coordinates: dict[str, str]) -> Doc:
        return variant(lambda d: find_test(d, GUARD).__setitem__("coordinates", coordinates))

    baseline = project(at({"environment": "production"}))
    moved = broken_obligations(baseline, project(at({"environment": "staging"})))
    assert [(d.pointer, d.message) for d in moved] == [
        (
            "/tests/0/coordinates",
            f"test `{GUARD}` now runs at environment `staging`, not at environment `production`",
        )
    ]
    dropped = broken_obligations(baseline, project(reference_doc()))
    assert [d.message for d in dropped] == [
        f"test `{GUARD}` now runs at no coordinates, not at environment `production`"
    ]
    same = project(at({"environment": "production", "consumer": ""}))  # empty is absent
    assert broken_obligations(baseline, same) == []
    assert broken(at({})) == []  # `{}` is the same scenario as no coordinates


def test_a_test_moved_to_another_principal() -> None:
    """A guard of a user outside the support group moved to a user in it no longer checks the
    outsider: the candidate could show that user the tool and still pass it."""

    def as_(principal: dict[str, Any] | None) -> Doc:
        def change(d: Doc) -> None:
            if principal is None:
                find_test(d, GUARD).pop("principal", None)
            else:
                find_test(d, GUARD)["principal"] = principal

        return variant(change)

    baseline = project(as_({"subject": "u-1", "claims": {"groups": ["learners"]}}))
    moved = project(as_({"subject": "u-1", "claims": {"groups": ["support"]}}))
    message = (
        f"test `{GUARD}` now runs as another principal (its issuer, subject, client or claims)"
    )
    assert [(d.pointer, d.message) for d in broken_obligations(baseline, moved)] == [
        ("/tests/0/principal", message)
    ]
    assert [d.message for d in broken_obligations(baseline, project(as_(None)))] == [message]
    same = project(as_({"claims": {"groups": ["learners"]}, "subject": "u-1"}))  # key order
    assert broken_obligations(baseline, same) == []
    assert broken(as_({})) == []  # `{}` is no principal, as no `principal` is


def test_an_exclusion_cannot_pass_by_making_the_tool_unavailable() -> None:
    def change(d: Doc) -> None:
        find_test(d, GUARD)["fixtures"] = {
            "inspect-context": {"state": "UNAVAILABLE"},
            "search-knowledge": {"state": "UNAVAILABLE"},
            "propose-change": {"state": "UNAVAILABLE"},
        }

    assert broken(variant(change)) == [
        (
            "/tests/0/fixtures",
            f"test `{GUARD}`: tool `{tool}` is no longer available under its fixtures",
        )
        for tool in ("inspect-context", "propose-change", "search-knowledge")
    ]


# Strengthening, and what is not an obligation.
def test_strengthening_is_allowed() -> None:
    def change(d: Doc) -> None:
        calls(d, "authoring-write-needs-approval")[0]["callId"] = "renamed"  # ids do not count
        args = calls(d, GUARD)[0]["arguments"]
        calls(d, GUARD)[0]["arguments"] = dict(reversed(list(args.items())))  # nor key order
        find_test(d, "learner-sees-reviewed-context-only")["guard"] = True
        find_test(d, "inspect-context-call-limit")["expect"]["tools"]["exclude"] = [
            "propose-change"
        ]
        calls(d, "inspect-context-call-limit").append(
            {
                "tool": "propose-change",
                "arguments": {},
                "expect": "DENY",
                "reason": "TOOL_NOT_DISCLOSED",
            }
        )
        bad = calls(d, "authoring-omits-unavailable-proposal-tool")[0]
        bad.pop("reason")
        d["tests"].append(
            {
                "id": "extra-guard",
                "objective": "learner",
                "guard": True,
                "fixtures": "current",
                "expect": {"tools": {"exclude": ["propose-change"]}},
            }
        )
        d["tests"].insert(0, d["tests"].pop(5))  # order does not count

    base = variant()
    calls(base, "authoring-omits-unavailable-proposal-tool")[0].pop("reason")
    stronger = variant(change)
    calls(stronger, "authoring-omits-unavailable-proposal-tool")[0]["reason"] = "TOOL_NOT_DISCLOSED"
    assert run_tests(project(stronger)).passed
    assert broken_obligations(project(base), project(stronger)) == []


def test_allowed_calls_of_a_test_that_is_not_a_guard_are_not_obligations() -> None:
    doc = variant(lambda d: calls(d, "authoring-write-needs-approval").pop(1))
    assert broken(doc) == []


# Through the registry.
def weakened_learner(doc: Doc) -> None:
    """The learner gets the proposal tool; its guard and the exclusions that would fail go."""
    doc["profiles"][0]["toolRules"][2] = {"tool": "propose-change", "participation": "include"}
    doc["tests"] = [t for t in doc["tests"] if t["id"] != GUARD]
    find_test(doc, "learner-search-unavailable-is-omitted")["expect"]["tools"]["exclude"] = [
        "search-knowledge"
    ]
    find_test(doc, "learner-sees-reviewed-context-only")["expect"]["tools"].pop("exclude")


def register(capsys: Cap, reg: Path, doc: Doc, path: Path) -> str:
    build = build_dir(doc, path)
    code, _, err = run(capsys, "register", "--build", str(path), "--registry", str(reg))
    assert code == 0, err
    return build.digest


@pytest.fixture
def registry(tmp_path: Path, capsys: Cap) -> tuple[Path, str]:
    """A registry with the reference build registered and promoted."""
    reg = tmp_path / "reg"
    digest = register(capsys, reg, reference_doc(), tmp_path / "reference")
    code, out, _ = run(
        capsys, "promote", "--registry", str(reg), "--candidate", digest, "--by", "alice"
    )
    assert code == 0 and out == f"promoted {digest} (the first promotion), record 1 by alice\n"
    return reg, digest


def test_promotion_refuses_a_candidate_that_drops_the_learner_guard(
    registry: tuple[Path, str], tmp_path: Path, capsys: Cap
) -> None:
    reg, reference = registry
    doc = variant(weakened_learner)
    assert run_tests(project(doc)).passed  # the candidate's own tests pass
    candidate = register(capsys, reg, doc, tmp_path / "weak")
    code, out, err = run(capsys, "promote", "--registry", str(reg), "--candidate", candidate)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"{reference}:/tests/0: {BLOCKED}: test `{GUARD}` is missing"
    removed = "the exclusion of tool `propose-change` was removed"
    assert lines[1:3] == [
        f"{reference}:/tests/1/expect/tools/exclude/0: {BLOCKED}: test "
        f"`learner-sees-reviewed-context-only`: {removed}",
        f"{reference}:/tests/8/expect/tools/exclude/1: {BLOCKED}: test "
        f"`learner-search-unavailable-is-omitted`: {removed}",
    ]
    assert lines[-1] == (
        f"{candidate}: {BLOCKED}: 3 obligations of the baseline {reference} broken; not promoted"
    )
    code, doc_out = run_json(capsys, "promote", "--registry", str(reg), "--candidate", candidate)
    assert code == 1 and doc_out["promoted"] is False and doc_out["tests"]["ok"] is True
    assert [d["pointer"] for d in doc_out["diagnostics"]] == [
        "/tests/0",
        "/tests/1/expect/tools/exclude/0",
        "/tests/8/expect/tools/exclude/1",
    ]
    assert Registry(reg).current() == reference and len(Registry(reg).history()) == 1


def test_an_explicit_baseline_is_checked_too(
    registry: tuple[Path, str], tmp_path: Path, capsys: Cap
) -> None:
    reg, reference = registry
    weak = register(capsys, reg, variant(weakened_learner), tmp_path / "weak")
    code, _, err = run(
        capsys, "promote", "--registry", str(reg), "--candidate", weak, "--baseline", reference
    )
    assert code == 1 and f"test `{GUARD}` is missing" in err


def test_a_strengthened_candidate_is_promoted_and_recorded(
    registry: tuple[Path, str], tmp_path: Path, capsys: Cap
) -> None:
    reg, reference = registry

    def stronger(d: Doc) -> None:
        d["version"] = "1.1.0"
        d["tests"].append(
            {
                "id": "authoring-search-guard",
                "objective": "authoring",
                "guard": True,
                "fixtures": "current",
                "expect": {"tools": {"include": ["search-knowledge"]}},
            }
        )

    candidate = register(capsys, reg, variant(stronger), tmp_path / "stronger")
    before = time.time_ns() // 1_000_000
    code, doc = run_json(
        capsys, "promote", "--registry", str(reg), "--candidate", candidate, "--by", "bob"
    )
    assert code == 0 and doc["promoted"] is True and doc["baseline"] == reference
    record = doc["record"]
    assert record["seq"] == 2 and record["by"] == "bob" and record["candidate"] == candidate
    assert record["baseline"] == reference and before <= record["at"] <= time.time_ns() // 10**6
    assert record["project"] == {"id": "agent-tools-reference", "version": "1.1.0"}
    # The reference is now weaker than the current promotion: promoting it back is blocked ...
    code, _, err = run(capsys, "promote", "--registry", str(reg), "--candidate", reference)
    assert code == 1 and "test `authoring-search-guard` is missing" in err
    # ... unless an operator names an explicit baseline it keeps; the record says so.
    code, out, _ = run(
        capsys, "promote", "--registry", str(reg), "--candidate", reference, "--baseline", reference
    )
    assert code == 0 and out.startswith(f"promoted {reference} over {reference}, record 3 by ")
    code, history = run_json(capsys, "registry", "history", "--registry", str(reg))
    assert code == 0 and history["current"] == reference
    assert [(r["seq"], r["candidate"], r["baseline"]) for r in history["promotions"]] == [
        (1, reference, None),
        (2, candidate, reference),
        (3, reference, reference),
    ]
    code, listing = run_json(capsys, "registry", "list", "--registry", str(reg))
    flags = {b["digest"]: (b["promoted"], b["current"]) for b in listing["builds"]}
    assert flags == {reference: (True, True), candidate: (True, False)}
    code, out, _ = run(capsys, "registry", "history", "--registry", str(reg))
    assert code == 0 and out.splitlines()[-1] == f"3 promotions, current: {reference}"
    assert " bob: promoted " in out.splitlines()[1]


def test_promotion_reruns_the_candidates_tests(tmp_path: Path, capsys: Cap) -> None:
    """A build registered without its tests (through the API) is refused at promotion."""

    def fail(d: Doc) -> None:
        find_test(d, GUARD)["expect"]["tools"]["include"] = ["propose-change"]

    build_dir(variant(fail), tmp_path / "bad")
    build = load_build(tmp_path / "bad")
    Registry(tmp_path / "reg").register(build)
    code, out, err = run(
        capsys, "promote", "--registry", str(tmp_path / "reg"), "--candidate", build.digest
    )
    assert code == 1 and out == ""
    assert "FAIL learner-never-sees-proposals: include tool propose-change" in err
    assert f"{BLOCKED}: the candidate's tests fail; not promoted" in err
    assert not (tmp_path / "reg" / HISTORY).exists()


def test_the_default_promoter_is_the_os_user(
    tmp_path: Path, capsys: Cap, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("seif.cli.promote.getpass.getuser", lambda: "os-user")
    digest = register(capsys, tmp_path / "reg", reference_doc(), tmp_path / "b")
    code, out, _ = run(
        capsys, "promote", "--registry", str(tmp_path / "reg"), "--candidate", digest
    )
    assert code == 0 and out.endswith("by os-user\n")


# The history is append-only and tamper-evident.
def _three_records(registry: tuple[Path, str], capsys: Cap) -> Path:
    reg, reference = registry
    for by in ("bob", "carol"):
        argv = ("promote", "--registry", str(reg), "--candidate", reference, "--by", by)
        assert run(capsys, *argv)[0] == 0
    return reg / HISTORY


def test_records_are_appended_and_chained(registry: tuple[Path, str], capsys: Cap) -> None:
    path = _three_records(registry, capsys)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 4
    records = [loads(line) for line in lines[:-1]]
    assert [r["by"] for r in records] == ["alice", "bob", "carol"]
    assert records[0]["prev"] is None
    assert records[1]["prev"] == build_digest(lines[0])
    assert records[2]["prev"] == build_digest(lines[1])


def _edit_by(data: bytes) -> bytes:
    return data.replace(b'"by":"bob"', b'"by":"eve"')


def _drop_first(data: bytes) -> bytes:
    return data.split(b"\n", 1)[1]


def _swap(data: bytes) -> bytes:
    lines = data.split(b"\n")
    return b"\n".join([lines[1], lines[0], *lines[2:]])


def _respace(data: bytes) -> bytes:
    return data.replace(b'"by":"bob"', b'"by": "bob"')


def _torn(data: bytes) -> bytes:
    return data[:-5]


def _drop_last(data: bytes) -> bytes:
    return b"\n".join(data.split(b"\n")[:-2]) + b"\n"


@pytest.mark.parametrize(
    ("tamper", "line"),
    [(_edit_by, 3), (_drop_first, 1), (_swap, 1), (_respace, 2), (_torn, 3)],
    ids=["edited", "first-removed", "reordered", "respaced", "torn"],
)
def test_a_tampered_history_is_refused(
    tamper: Any, line: int, registry: tuple[Path, str], capsys: Cap
) -> None:
    path = _three_records(registry, capsys)
    path.write_bytes(tamper(path.read_bytes()))
    reg = str(path.parent)
    code, out, err = run(capsys, "registry", "history", "--registry", reg)
    assert code == 1 and out == ""
    assert err.startswith(f"{path}:{line}:1: HISTORY_CORRUPT: ")
    before = path.read_bytes()
    code, _, err = run(capsys, "promote", "--registry", reg, "--candidate", registry[1])
    assert code == 1 and "HISTORY_CORRUPT" in err
    assert path.read_bytes() == before
    code, doc = run_json(capsys, "registry", "history", "--registry", reg)
    assert code == 1 and doc["diagnostics"][0]["line"] == line


def test_dropping_the_last_record_cannot_be_told_from_the_chain(
    registry: tuple[Path, str], capsys: Cap
) -> None:
    """A known limit, documented: truncation at a record boundary keeps a valid chain."""
    path = _three_records(registry, capsys)
    path.write_bytes(_drop_last(path.read_bytes()))
    code, doc = run_json(capsys, "registry", "history", "--registry", str(path.parent))
    assert code == 0 and len(doc["promotions"]) == 2
