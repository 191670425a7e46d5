"""Properties: for generated projects and observation histories, what the runtime's logging path
records (``events.disclosure_summary``, ``DecisionLog.append``, ``read_records``) replays to
identical disclosures, through CBOR and through a JSON Lines export; a changed scalar anywhere
in a recorded disclosure is detected; a build compared with itself changes nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.builds.build import make_build
from compiler.driver import compile_document
from policy import disclose
from policy.offline.replay import replay, what_if
from seif.tracefile import export, open_log
from servers.log.decision_log import DecisionLog, read_records
from servers.runtime import events
from tests.support.strategies import COORDINATES, observations, projects


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, Any], list[tuple[str, Any, Any]]]:
    """A project and a history of resolutions: objective, observations, coordinates."""
    doc = draw(projects())
    objectives = [o["id"] for o in doc["objectives"]]
    steps = draw(
        st.lists(
            st.tuples(st.sampled_from(objectives), observations(doc), COORDINATES),
            min_size=1,
            max_size=8,
        )
    )
    return doc, steps


def record(data: Path, doc: dict[str, Any], steps: list[tuple[str, Any, Any]]) -> Any:
    """Resolve each step as the runtime does and log it; return the build."""
    result = compile_document(doc)
    assert result.project is not None, result.diagnostics
    build = make_build(result.project)
    with DecisionLog.open(data / "decisions.cbor", fsync_every=0) as log:
        for i, (objective, seen, coordinates) in enumerate(steps):
            coords = {k: coordinates.get(k, "") for k in ("consumer", "environment")}
            coords |= {"deployment": "", "trace": f"trace-{i}"}
            d = disclose(build.project, objective, seen, context=coords)
            log.append(
                {
                    "event": "DISCLOSED",
                    "at": i,
                    "build": build.digest,
                    "environment": "test",
                    "bindingRevision": 1,
                    "coordinates": events.coordinates({**coords, "objective": objective}),
                    "objective": objective,
                    "resolvedAt": i,
                    "observations": seen,
                    "disclosure": events.disclosure_summary(d),
                }
            )
    return build


@settings(max_examples=60)
@given(histories())
def test_recorded_disclosures_replay_identically(history: Any) -> None:
    doc, steps = history
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        build = record(data, doc, steps)
        logged = list(read_records(data / "decisions.cbor"))
        report = replay(build.project, logged, build_digest=build.digest)
        assert report.ok, report.to_json()
        assert report.disclosed == report.reproduced == len(steps)
        export(data, data / "log.jsonl", "jsonl")
        again = replay(
            build.project, open_log(data / "log.jsonl").records(), build_digest=build.digest
        )
        assert again == report
        same = what_if(build.project, build.project, logged, build_digest=build.digest)
        assert same.changes == () and same.considered == len(steps)


def _scalar_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _scalar_paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _scalar_paths(v, (*path, i))]
    return [path]


def _changed(value: Any) -> Any:
    if value is None:
        return "x"
    if isinstance(value, bool):
        return int(value)  # equal in Python, not in JSON
    if isinstance(value, int):
        return value + 1
    return str(value) + "~"


@settings(max_examples=60)
@given(histories(), st.data())
def test_a_changed_scalar_in_a_recorded_disclosure_is_detected(history: Any, data: Any) -> None:
    doc, steps = history
    with tempfile.TemporaryDirectory() as tmp:
        build = record(Path(tmp), doc, steps)
        logged = list(read_records(Path(tmp) / "decisions.cbor"))
    victim = data.draw(st.integers(0, len(logged) - 1))
    paths = _scalar_paths(logged[victim]["disclosure"])
    path = data.draw(st.sampled_from(paths))
    target = logged[victim]["disclosure"]
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = _changed(target[path[-1]])
    report = replay(build.project, logged, build_digest=build.digest)
    assert [m.record.seq for m in report.mismatches] == [victim + 1]
    pointer = "/disclosure/" + "/".join(str(p) for p in path)
    assert [d.pointer for d in report.mismatches[0].differences] == [pointer]
