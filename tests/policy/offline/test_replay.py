"""policy.offline.replay and policy.offline.whatif over records written the way the runtime writes
them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import policy
from policy.offline.recorded import disclosure_summary
from policy.offline.replay import ABSENT, Difference, differences, replay, what_if
from servers.runtime import events
from tests.support.replay_support import (
    compiled,
    disclosed_record,
    ready,
    reference_build,
    reference_document,
    without_search_for_learner,
)

BUILD = reference_build()
IR = BUILD.project
DIGEST = BUILD.digest
OTHER = "blake3:" + "0" * 64
READY = ready(IR)
DOWN = {"state": "UNAVAILABLE", "detail": "UNREACHABLE"}
OLD = {**READY["propose-change"], "contractDigest": "sha256:" + "1" * 64}


def session() -> list[dict[str, Any]]:
    """Resolutions under changing availability, and events of other kinds."""
    rows = [
        ("learner", READY, {"consumer": "tutor-app"}),
        ("authoring", READY, {"consumer": "course-authoring"}),
        ("learner", READY, {"consumer": "tutor-app", "environment": "staging"}),
        ("learner", {**READY, "search-knowledge": DOWN}, {}),
        ("authoring", {**READY, "propose-change": OLD}, {}),
        ("learner", {**READY, "inspect-context": DOWN}, {}),  # blocked
        ("learner", READY, {"consumer": "tutor-app"}),
    ]
    out: list[dict[str, Any]] = []
    for objective, seen, coords in rows:
        out.append(
            disclosed_record(IR, DIGEST, objective, seen, coords, context_ref=f"c{len(out)}")
        )
        out.append({"event": "REPORTED", "build": DIGEST, "tools": []})
    for seq, record in enumerate(out, start=1):
        record |= {"v": 1, "seq": seq}
    return out


def test_a_session_replays_exactly() -> None:
    log = session()
    report = replay(IR, log, build_digest=DIGEST)
    assert report.ok and not report.mismatches
    assert (report.records, report.disclosed, report.reproduced) == (14, 7, 7)
    assert report.other_events == 7 and report.skipped_other_build == 0
    assert report.distinct_inputs == 6  # the first and last resolutions are the same input
    assert report.to_json()["mismatches"] == []
    assert [r["disclosure"]["status"] for r in log if r["event"] == "DISCLOSED"].count(
        "BLOCKED"
    ) == 1


def test_the_cache_changes_nothing_but_the_work() -> None:
    log = session()
    cached, uncached = (
        replay(IR, log, build_digest=DIGEST),
        replay(IR, log, build_digest=DIGEST, cache_size=0),
    )
    assert uncached.distinct_inputs == 7
    assert cached.to_json() | {"distinctInputs": 7} == uncached.to_json()


def test_a_trace_id_does_not_split_the_cache() -> None:
    log = [disclosed_record(IR, DIGEST, "learner", READY) for _ in range(3)]
    for i, record in enumerate(log):
        record["coordinates"] = {**record["coordinates"], "trace": f"trace-{i}"}
    assert replay(IR, log, build_digest=DIGEST).distinct_inputs == 1


def _one(record: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    report = replay(IR, [record], build_digest=DIGEST)
    assert report.disclosed == 1
    return [(d.pointer, d.recorded, d.replayed) for m in report.mismatches for d in m.differences]


def test_tampered_observations_are_detected() -> None:
    record = disclosed_record(IR, DIGEST, "learner", READY)
    record["observations"]["search-knowledge"] = DOWN
    found = _one(record)
    pointers = [p for p, _, _ in found]
    assert pointers == [
        "/disclosure/tools",
        "/disclosure/omitted",
        "/disclosure/tokens/tools",
        "/disclosure/tokens/total",
    ]
    assert found[0][2] == [
        {
            "id": "inspect-context",
            "contractDigest": IR.tool_by_id["inspect-context"].contract_digest,
        }
    ]
    assert found[1][2][0]["reason"] == "TOOL_UNAVAILABLE"


def test_observations_the_engine_does_not_read_change_nothing() -> None:
    record = disclosed_record(IR, DIGEST, "learner", READY)
    record["observations"]["propose-change"] = DOWN  # excluded for learners: never a candidate
    assert _one(record) == []


TAMPERS = {
    "status": (lambda d: d.update(status="BLOCKED"), "/disclosure/status"),
    "digest": (
        lambda d: d["tools"][0].update(contractDigest="sha256:" + "2" * 64),
        "/disclosure/tools/0/contractDigest",
    ),
    "dropped tool": (lambda d: d["tools"].pop(), "/disclosure/tools"),
    "message": (lambda d: d["messages"].insert(0, d["messages"].pop(1)), "/disclosure/messages/0"),
    "tokens": (lambda d: d["tokens"].update(total=1), "/disclosure/tokens/total"),
    "estimated": (lambda d: d["tokens"].update(estimated=1), "/disclosure/tokens/estimated"),
    "ceiling bool": (lambda d: d["tokens"].update(ceiling=True), "/disclosure/tokens/ceiling"),
    "reason": (
        lambda d: d["omitted"][0].update(reason="TOOL_INCOMPATIBLE"),
        "/disclosure/omitted/0/reason",
    ),
    "explanation": (
        lambda d: d["omitted"][0]["explanation"].update(rule=True),
        "/disclosure/omitted/0/explanation/rule",
    ),
    "extra field": (lambda d: d.update(note="x"), "/disclosure/note"),
    "missing field": (lambda d: d.pop("causes"), "/disclosure/causes"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TAMPERS))
def test_a_tampered_outcome_is_detected(name: str) -> None:
    change, pointer = TAMPERS[name]
    record = disclosed_record(IR, DIGEST, "learner", {**READY, "search-knowledge": DOWN})
    change(record["disclosure"])
    found = _one(record)
    assert [p for p, _, _ in found][:1] == [pointer]
    assert len(found) == (2 if name == "message" else 1)


def test_numbers_compare_by_value() -> None:
    record = disclosed_record(IR, DIGEST, "learner", READY)
    record["disclosure"]["tokens"]["total"] = float(record["disclosure"]["tokens"]["total"])
    assert _one(record) == []


def test_a_malformed_record_is_a_mismatch_with_its_problem() -> None:
    bad = [
        {**disclosed_record(IR, DIGEST, "learner", READY), "observations": ["READY"]},
        {**disclosed_record(IR, DIGEST, "learner", READY), "objective": 3},
        {**disclosed_record(IR, DIGEST, "learner", READY), "disclosure": None},
    ]
    report = replay(IR, bad, build_digest=DIGEST)
    assert [m.problem for m in report.mismatches] == [
        "`observations` is not a map of tool id to observation",
        "`objective` is not a string",
        "`disclosure` is not a map",
    ]
    assert not report.ok


def test_records_of_another_build_are_counted_not_evaluated() -> None:
    mine = disclosed_record(IR, DIGEST, "learner", READY)
    theirs = {**disclosed_record(IR, OTHER, "learner", READY), "observations": "garbage"}
    report = replay(IR, [mine, theirs, theirs, {"event": "DISCLOSED"}], build_digest=DIGEST)
    assert report.ok and report.disclosed == 1 and report.reproduced == 1
    assert report.other_builds == (("(none)", 1), (OTHER, 2))
    assert report.to_json()["skippedOtherBuild"] == 3


def test_disclosures_of_other_builds_alone_verify_nothing() -> None:
    assert not replay(IR, [disclosed_record(IR, OTHER, "learner", READY)], build_digest=DIGEST).ok
    assert replay(IR, [], build_digest=DIGEST).ok


def test_differences_name_each_side() -> None:
    assert differences({"a": 1, "b": [1, 2]}, {"a": 1.0, "b": [1, 3], "c": None}) == [
        Difference(pointer="/b/1", recorded=2, replayed=3),
        Difference(pointer="/c", recorded=ABSENT, replayed=None),
    ]
    assert Difference(pointer="/c", recorded=ABSENT, replayed=None).to_json() == {
        "pointer": "/c",
        "replayed": None,
    }
    assert differences([True], [1]) == [Difference(pointer="/0", recorded=True, replayed=1)]


def test_the_runtime_logs_with_the_summary_replay_compares() -> None:
    d = policy.disclose(IR, "authoring", READY)
    assert events.disclosure_summary(d) == disclosure_summary(d)
    assert policy.replay is replay and policy.what_if is what_if
    assert {"replay", "what_if", "ReplayReport", "WhatIfReport"} <= set(policy.__all__)


# ---------------------------------------------------------------- what-if


CANDIDATE = without_search_for_learner()


def test_what_if_names_exactly_the_changed_disclosures() -> None:
    log = session()
    report = what_if(IR, CANDIDATE, log, build_digest=DIGEST, candidate_digest="blake3:cand")
    changed = {c.record.context_ref: c.change for c in report.changes}
    # learner resolutions: where search-knowledge was disclosed it is withheld, where it was
    # unavailable it is no longer an omission; the blocked one and authoring do not change
    assert sorted(changed) == ["c0", "c12", "c4", "c6"]
    for ref in ("c0", "c4", "c12"):
        assert [w.to_json() for w in changed[ref].withheld] == [
            {"id": "search-knowledge", "reason": None}
        ]
        assert changed[ref].disclosed == () and changed[ref].status == ("RESOLVED", "RESOLVED")
        before, after = changed[ref].tokens
        tool = IR.tool_by_id["search-knowledge"]
        assert before["tools"] - after["tools"] == tool.tokens
    unavailable = changed["c6"]
    assert unavailable.withheld == () and unavailable.tokens[0] == unavailable.tokens[1]
    assert [o.to_json() for o in unavailable.omissions] == [
        {"id": "search-knowledge", "kind": "tool", "baseline": "TOOL_UNAVAILABLE",
         "candidate": None}
    ]  # fmt: skip
    summary = report.summary.to_json()
    assert summary["recordsChanged"] == 4
    assert summary["newlyWithheld"] == {"search-knowledge": 3}
    assert summary["newlyDisclosed"] == {} and summary["statusChanges"] == {}
    assert summary["budget"]["recordsChanged"] == 3 and summary["budget"]["ceilingChanged"] == 0
    saved = 3 * IR.tool_by_id["search-knowledge"].tokens
    assert summary["budget"]["tokensBaseline"] - summary["budget"]["tokensCandidate"] == saved
    assert report.considered == 7 and report.to_json()["unchanged"] == 3


def test_what_if_the_other_way_round_discloses_the_tool() -> None:
    log = [disclosed_record(CANDIDATE, "blake3:cand", "learner", READY)]
    report = what_if(CANDIDATE, IR, log, build_digest="blake3:cand")
    assert report.summary.newly_disclosed == (("search-knowledge", 1),)
    assert report.summary.newly_withheld == ()


def test_what_if_reports_status_and_budget_changes() -> None:
    document = reference_document()
    learner = next(p for p in document["profiles"] if p["id"] == "learner")
    learner["tokenCeiling"] = 100  # the required messages no longer fit: blocked
    tight = compiled(document)
    report = what_if(IR, tight, session(), build_digest=DIGEST)
    # five learner resolutions, one of them blocked already
    assert report.summary.status_changes == (("RESOLVED -> BLOCKED", 4),)
    assert report.summary.ceiling_changes == 5 and report.summary.records_changed == 5
    blocked = next(c for c in report.changes if c.change.status[1] == "BLOCKED")
    assert blocked.change.reason == (None, "RESOLUTION_BLOCKED")
    assert blocked.change.messages_removed and {w.id for w in blocked.change.withheld} == {
        "inspect-context",
        "search-knowledge",
    }


def test_what_if_of_a_build_with_itself_changes_nothing() -> None:
    same = compiled(copy.deepcopy(reference_document()))
    report = what_if(IR, same, session(), build_digest=DIGEST)
    assert report.changes == () and report.summary.records_changed == 0
    assert report.summary.tokens_baseline == report.summary.tokens_candidate


def test_what_if_skips_other_builds_and_lists_unusable_records() -> None:
    log = [
        disclosed_record(IR, OTHER, "learner", READY),
        {**disclosed_record(IR, DIGEST, "learner", READY), "coordinates": None},
        {"event": "RESULT", "build": DIGEST},
    ]
    report = what_if(IR, CANDIDATE, log, build_digest=DIGEST)
    assert report.considered == 0 and report.other_builds == ((OTHER, 1),)
    assert [why for _, why in report.unusable] == ["`coordinates` is not a map"]
    assert report.other_events == 1


# --- the principal ---------------------------------------------------------------------------

FINGERPRINT = "hmac-sha256:" + "5" * 32


def principal_build() -> tuple[Any, str]:
    """The reference project with rules on the principal: learners see ``search-knowledge``
    only in the ``tutors`` group, authors see ``propose-change`` only from ``tutor-app`` and
    never as the subject ``blocked``."""
    document = reference_document()
    rules = {p["id"]: p["toolRules"] for p in document["profiles"]}
    rules["learner"][1]["when"] = (
        "has(principal.claims.groups) && 'tutors' in principal.claims.groups"
    )
    rules["authoring"][2]["when"] = (
        "principal.clientId == 'tutor-app'"
        " || (principal.subject != null && principal.subject != 'blocked')"
    )
    project = compiled(document)
    return project, "blake3:" + "9" * 64


def token_principal(groups: list[str], subject: str = FINGERPRINT) -> dict[str, Any]:
    return {"issuer": "corp", "clientId": "web", "subject": subject, "claims": {"groups": groups}}


def test_recorded_principals_replay_and_a_changed_claim_is_a_mismatch() -> None:
    ir, digest = principal_build()
    ready_now = ready(ir)
    tutor = disclosed_record(
        ir, digest, "learner", ready_now, principal=token_principal(["tutors"]), credential="x"
    )
    other = disclosed_record(ir, digest, "learner", ready_now, principal=token_principal([]))
    assert [t["id"] for t in tutor["disclosure"]["tools"]] == [
        "inspect-context",
        "search-knowledge",
    ]
    assert [t["id"] for t in other["disclosure"]["tools"]] == ["inspect-context"]
    report = replay(ir, [tutor, other], build_digest=digest)
    assert report.ok and report.reproduced == 2 and report.distinct_inputs == 2
    changed = copy.deepcopy(other)
    changed["principal"]["claims"]["groups"] = ["tutors"]  # the claims recorded were not these
    [mismatch] = replay(ir, [changed], build_digest=digest).mismatches
    assert mismatch.differences[0].pointer.startswith("/disclosure/")


def test_a_record_without_principal_was_resolved_by_its_credential() -> None:
    """A static credential's record carries no principal (compact): its principal is its
    ``credential``'s, ``{issuer: null, subject: null, clientId: credential, claims: {}}``; a
    record of an older runtime without ``credential`` has no client either."""
    ir, digest = principal_build()
    ready_now = ready(ir)
    app = disclosed_record(ir, digest, "authoring", ready_now, credential="tutor-app")
    assert "principal" not in app
    assert "propose-change" in [t["id"] for t in app["disclosure"]["tools"]]
    old = {k: v for k, v in app.items() if k != "credential"}
    assert replay(ir, [app], build_digest=digest).reproduced == 1
    [mismatch] = replay(ir, [old], build_digest=digest).mismatches  # clientId null: not shown
    assert mismatch.differences
    reader = disclosed_record(ir, digest, "learner", ready_now, credential="tutor-app")
    assert replay(ir, [reader, {**reader, "credential": "other-app"}], build_digest=digest).ok


def test_a_disclosure_that_reads_the_subject_is_not_reproducible() -> None:
    """The subject is recorded as a keyed fingerprint: a disclosure whose rules read
    ``principal.subject`` cannot be evaluated again as it was made. It is reported, neither
    reproduced nor a mismatch; one without a subject (a static credential) reproduces."""
    ir, digest = principal_build()
    ready_now = ready(ir)
    user = token_principal(["authors"])
    made = {**user, "subject": "blocked"}  # the subject in clear when it was resolved
    by_token = disclosed_record(
        ir, digest, "authoring", ready_now, principal=user, resolved_by=made
    )
    assert "propose-change" not in [t["id"] for t in by_token["disclosure"]["tools"]]
    by_app = disclosed_record(ir, digest, "authoring", ready_now, credential="tutor-app")
    learner = disclosed_record(ir, digest, "learner", ready_now, principal=user)
    for seq, record in enumerate((by_token, by_app, learner), start=1):
        record["seq"] = seq
    report = replay(ir, [by_token, by_app, learner], build_digest=digest)
    assert report.ok and not report.mismatches
    assert (report.disclosed, report.reproduced) == (3, 2)
    assert [r.seq for r in report.not_reproducible] == [1]
    assert report.to_json()["notReproducible"] == [
        {"seq": 1, "contextRef": "ctx_1", "objective": "authoring"}
    ]


def test_a_malformed_principal_is_a_mismatch_with_its_problem() -> None:
    ir, digest = principal_build()
    record = disclosed_record(ir, digest, "learner", ready(ir), principal=token_principal([]))
    for bad, problem in (
        ("alice", "`principal` is not a map with a map of `claims`"),
        ({**token_principal([]), "claims": ["groups"]}, "`principal` is not a map"),
        ({**token_principal([]), "subject": 7}, "`principal.subject` is not a string or null"),
    ):
        [mismatch] = replay(ir, [{**record, "principal": bad}], build_digest=digest).mismatches
        assert mismatch.problem is not None and mismatch.problem.startswith(problem)
