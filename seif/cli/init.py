"""`seif init [--seif] [--out FILE]`: a starter project that `seif test` passes
(:mod:`compiler.authoring.starter_project`): one objective, one profile, one read tool and one
guard test.

A JSON project (the default, `project.json`) names `seif-project.schema.json` in its `$schema`
and that file (`seif schema project`'s output) is written beside it, unless a file of that name
is already there (then it is kept, and the command says how to refresh it). With `--seif` the
project is written in the policy language (default `project.seif`), with no schema. An existing
project file is never overwritten. Exit codes: 0 written, 2 the file exists or cannot be
written (nothing written).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seif.cli.output import EXIT_OK, EXIT_USAGE, problem, say
from seif.cli.parsing import command

EXAMPLE = "seif init --out support-agent.json"


def add_parser(sub: Any) -> None:
    summary = "write a starter project that `seif test` passes"
    init = command(sub, "init", summary, EXAMPLE, description=summary)
    init.add_argument(
        "--seif", action="store_true", help="write it in the policy language (`.seif`)"
    )
    init.add_argument(
        "--out", metavar="FILE",
        help="the project file to write (default `project.json`, or `project.seif` with --seif); "
        "an existing file is never overwritten",
    )  # fmt: skip
    init.set_defaults(run=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from compiler.authoring.starter_project import SCHEMA_FILE, starter_project  # noqa: PLC0415
    from compiler.project_schema import project_schema  # noqa: PLC0415
    from compiler.seif.printer import to_seif  # noqa: PLC0415
    from policy.json.strict import dumps  # noqa: PLC0415

    out = Path(args.out or ("project.seif" if args.seif else "project.json"))
    if args.seif:
        text = to_seif(starter_project(schema=None))
    else:
        text = dumps(starter_project(), indent=2) + "\n"
    try:
        with out.open("x", encoding="utf-8") as file:  # "x": refuses an existing file
            file.write(text)
    except FileExistsError:
        problem(str(out), "FILE_EXISTS", "the file exists; nothing was written (give --out FILE)")
        return EXIT_USAGE
    except OSError as exc:
        problem(str(out), "FILE_UNWRITABLE", f"{exc.strerror or exc}; nothing was written")
        return EXIT_USAGE
    say(f"wrote {out}")
    if not args.seif:
        schema = out.parent / SCHEMA_FILE
        if schema.exists():
            say(f"kept {schema} (refresh it: seif schema project > {schema})")
        else:
            schema.write_text(dumps(project_schema(), indent=2) + "\n", encoding="utf-8")
            say(f"wrote {schema} (the project's JSON Schema, for your editor)")
    say("next:")
    say(f"  seif test --project {out} -v      # run its guard test")
    say(f"  seif tool new --project {out} --template knowledge-search --id search-docs")
    say(f"  seif tool include --project {out} --tool search-docs --profile assistant")
    say(f"  seif tool protect --project {out} --tool search-docs")
    say(f"  seif validate --project {out}")
    return EXIT_OK
