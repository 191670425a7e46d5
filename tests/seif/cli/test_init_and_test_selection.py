"""`seif init` and `seif test -v / --run`, as a user runs them (subprocesses).

init writes a starter project that validates and whose guard test passes, in JSON (with its
`$schema` file beside it, and the schema accepts it) or `.seif`, never over an existing file;
every next step it prints runs as printed. `-v` lists every test with its result; `--run`
keeps the tests whose id matches a glob, and a glob that matches none is refused (exit 2)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from jsonschema import Draft202012Validator

from tests.support.cli import seif
from tests.support.paths import REFERENCE

SUMMARY = "context: 1/1 passed, tools: 3/3 passed"


def test_init_writes_a_json_project_its_schema_and_next_steps_that_run(tmp_path: Path) -> None:
    done = seif("init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        "wrote project.json",
        "wrote seif-project.schema.json (the project's JSON Schema, for your editor)",
        "next:",
    ]
    project = json.loads((tmp_path / "project.json").read_text())
    schema = json.loads((tmp_path / "seif-project.schema.json").read_text())
    assert project["$schema"] == "seif-project.schema.json"
    assert list(Draft202012Validator(schema).iter_errors(project)) == []
    assert schema == json.loads(seif("schema", "project", cwd=tmp_path).stdout)
    assert seif("fmt", "project.json", "--check", cwd=tmp_path).returncode == 0
    assert [len(project[k]) for k in ("objectives", "profiles", "tools", "tests")] == [1] * 4
    assert project["tools"][0]["effect"] == "read" and project["tests"][0]["guard"] is True
    for step in lines[3:]:  # each next step, as printed (a shell comment may end it)
        argv = shlex.split(step, comments=True)
        assert argv[0] == "seif"
        ran = seif(*argv[1:], cwd=tmp_path)
        assert ran.returncode == 0, (step, ran.stdout, ran.stderr)
    tested = seif("test", "--project", "project.json", cwd=tmp_path)
    assert tested.returncode == 0 and "3 tests, 3 passed" in tested.stdout


def test_init_seif_writes_the_same_project_in_the_language(tmp_path: Path) -> None:
    done = seif("init", "--seif", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("wrote project.seif\nnext:\n")
    assert not (tmp_path / "seif-project.schema.json").exists()
    tested = seif("test", "project.seif", "-v", cwd=tmp_path)
    assert tested.returncode == 0
    assert tested.stdout.splitlines() == [
        "PASS record-lookup-audience-assistant (objective assistant, guard: 4/4 assertions)",
        SUMMARY,
        "1 test, 1 passed",
    ]
    assert seif("init", "--out", "p.json", cwd=tmp_path).returncode == 0
    as_json = json.loads(seif("convert", "project.seif", "--to", "json", cwd=tmp_path).stdout)
    written = json.loads((tmp_path / "p.json").read_text())
    assert {"$schema": "seif-project.schema.json", **as_json} == written
    to_seif = seif("convert", "p.json", "--to", "seif", cwd=tmp_path)  # `$schema` is left out
    assert to_seif.returncode == 0 and to_seif.stdout == (tmp_path / "project.seif").read_text()
    assert (
        to_seif.stderr
        == "p.json: `$schema` (for editors of the JSON file) has no .seif form: left out\n"
    )
    built = [seif("build", p, "--out", p + ".b", cwd=tmp_path) for p in ("project.seif", "p.json")]
    assert built[0].returncode == 0 and built[0].stdout == built[1].stdout  # one digest


def test_init_never_overwrites_and_keeps_an_existing_schema_file(tmp_path: Path) -> None:
    (tmp_path / "project.json").write_text("mine")
    refused = seif("init", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        "project.json: FILE_EXISTS: the file exists; nothing was written (give --out FILE)\n"
    )
    assert (tmp_path / "project.json").read_text() == "mine"
    assert not (tmp_path / "seif-project.schema.json").exists()
    (tmp_path / "seif-project.schema.json").write_text("{}")
    sub = tmp_path / "agents"
    sub.mkdir()
    (sub / "seif-project.schema.json").write_text("{}")
    done = seif("init", "--out", "agents/support.json", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.splitlines()[1] == (
        "kept agents/seif-project.schema.json "
        "(refresh it: seif schema project > agents/seif-project.schema.json)"
    )
    assert (sub / "seif-project.schema.json").read_text() == "{}"
    missing = seif("init", "--out", "nowhere/p.json", cwd=tmp_path)
    assert missing.returncode == 2 and "FILE_UNWRITABLE" in missing.stderr


def test_verbose_lists_every_test_with_its_result(tmp_path: Path) -> None:
    doc = json.loads(REFERENCE.read_text())
    doc["tests"][1]["expect"]["tools"]["include"].append("propose-change")
    (tmp_path / "p.json").write_text(json.dumps(doc))
    done = seif("test", "--project", "p.json", "-v", cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    listed = [line for line in lines if line.startswith(("PASS ", "FAIL "))]
    assert [line.split()[1] for line in listed] == [t["id"] for t in doc["tests"]]
    assert listed[1].startswith(f"FAIL {doc['tests'][1]['id']} (objective ")
    assert all(line.startswith("PASS ") for i, line in enumerate(listed) if i != 1)
    assert lines[len(listed)].startswith("p.json:/tests/1/expect/tools/include/2: FAIL ")
    assert lines[-2].startswith("context: ") and lines[-1] == "13 tests, 12 passed"
    quiet = seif("test", "--project", "p.json", cwd=tmp_path).stdout.splitlines()
    assert quiet == lines[len(listed) :]  # without -v: the failures and the summary only


def test_run_keeps_the_tests_whose_id_matches_the_glob(tmp_path: Path) -> None:
    ids = [t["id"] for t in json.loads(REFERENCE.read_text())["tests"]]
    done = seif("test", str(REFERENCE), "-v", "--run", "learner-*", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    kept = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("PASS ")]
    assert kept == [i for i in ids if i.startswith("learner-")] and 0 < len(kept) < len(ids)
    assert (
        done.stdout.splitlines()[-1]
        == f"{len(kept)} test{'' if len(kept) == 1 else 's'}, {len(kept)} passed"
    )
    never = seif("test", str(REFERENCE), "--run", "*-never-*", "--json", cwd=tmp_path)
    as_json = json.loads(never.stdout)
    assert [t["id"] for t in as_json["tests"]] == [i for i in ids if "-never-" in i]
    one = seif("test", str(REFERENCE), "--run", ids[3], cwd=tmp_path)
    assert one.stdout.splitlines()[-1] == "1 test, 1 passed"


def test_a_failing_test_kept_by_run_keeps_its_pointer(tmp_path: Path) -> None:
    doc = json.loads(REFERENCE.read_text())
    doc["tests"][5]["expect"]["tools"]["include"] = ["propose-change"]
    (tmp_path / "p.json").write_text(json.dumps(doc))
    done = seif("test", "p.json", "--run", doc["tests"][5]["id"], cwd=tmp_path)
    assert done.returncode == 1
    first = f"p.json:/tests/5/expect/tools/include/0: FAIL {doc['tests'][5]['id']}: "
    assert done.stdout.startswith(first), done.stdout
    skipped = seif("test", "p.json", "--run", doc["tests"][0]["id"], cwd=tmp_path)
    assert skipped.returncode == 0  # the failing test was not run


def test_a_glob_that_matches_nothing_is_refused(tmp_path: Path) -> None:
    done = seif("test", str(REFERENCE), "--run", "Learner-*", cwd=tmp_path)  # case matters
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"{REFERENCE}: no test id matches `Learner-*` (13 tests)\n"
    as_json = seif("test", str(REFERENCE), "--run", "zz", "--json", cwd=tmp_path)
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout) == {
        "ok": False,
        "error": {"code": "NO_TEST_MATCHES", "message": "no test id matches `zz` (13 tests)"},
    }
