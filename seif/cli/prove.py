"""`seif prove --output FILE [--keep]`: the end-to-end proof of a delivery (docs/delivery.md).

Every step of :data:`seif.proof.steps.STEPS` runs in order in a new delivery directory outside
the repository, and is recorded as a check with what it observed. The first step that fails
stops the proof: the evidence names it and what it saw, and the exit status is 1. Every process
the proof started is stopped, whatever happened; without ``--keep`` the delivery directory is
removed at the end (with it, it is kept for inspection, its data directory included).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from seif import __version__
from seif.cli.output import EXIT_NOT_ACCEPTABLE, EXIT_OK, EXIT_USAGE, problem
from seif.cli.parsing import command

if TYPE_CHECKING:  # the steps (and aiohttp with them) load only when `seif prove` runs
    from collections.abc import Callable, Sequence

    from seif.proof.steps import Delivery

    Step = tuple[str, str, Callable[[Delivery], dict[str, Any]]]

FORMAT = "seif.proof-evidence.v1"
UNMEASURED = ["setup effort", "answer quality improvement", "saved labor"]


EXAMPLE = "seif prove --output evidence/context-tools-delivery.json --keep"


def add_parser(sub: Any) -> None:
    summary = "prove a delivery of the reference project end to end"
    parser = command(sub, "prove", summary, EXAMPLE)
    parser.add_argument("--output", required=True, metavar="FILE", help="the evidence file (JSON)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the delivery directory for inspection"
    )
    parser.set_defaults(run=cmd_prove)


def cmd_prove(args: argparse.Namespace) -> int:
    from seif.proof.steps import Delivery  # noqa: PLC0415  # not at `seif` start-up

    output = Path(args.output).resolve()
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem(args.output, "OUTPUT_UNWRITABLE", str(exc.strerror or exc))
        return EXIT_USAGE
    root = Path(tempfile.mkdtemp(prefix="seif-delivery-")).resolve()
    print(f"delivery directory: {root}", flush=True)
    previous = signal.signal(signal.SIGTERM, _interrupted)  # SIGTERM as Ctrl-C: cleaned up
    try:
        evidence = run_proof(Delivery(root), sys.stdout)
        write_evidence(output, evidence)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not args.keep:
            _remove(root)
    summary(evidence, output, kept=args.keep, out=sys.stdout)
    return EXIT_OK if evidence["ok"] else EXIT_NOT_ACCEPTABLE


def _remove(root: Path, attempts: int = 20) -> None:
    """Remove the delivery directory, again while a server just stopped still leaves a file
    in it (its last write racing the removal), for about two seconds at most."""
    for _ in range(attempts):
        shutil.rmtree(root, ignore_errors=True)
        if not root.exists():
            return
        time.sleep(0.1)


def _interrupted(_signum: int, _frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the cleanup is not cut short again
    raise KeyboardInterrupt("SIGTERM")


INTERRUPTED = {"error": "interrupted (SIGINT or SIGTERM)"}


def run_proof(delivery: Delivery, out: TextIO) -> dict[str, Any]:
    """Run the steps until one fails; the evidence document. Stops every process it started."""
    from seif.proof.steps import STEPS  # noqa: PLC0415  # not at `seif` start-up

    checks: list[dict[str, Any]] = []
    try:
        _steps(delivery, STEPS, checks, out)
    except KeyboardInterrupt:  # between two steps (writing a line, say): the next one failed
        if not checks or checks[-1]["ok"]:
            checks.append({"id": STEPS[len(checks)][0], "ok": False, "observed": INTERRUPTED})
    finally:
        delivery.stop_all()
    failed = next((c["id"] for c in checks if not c["ok"]), None)
    return {
        "format": FORMAT,
        "seifVersion": __version__,
        "ok": failed is None and len(checks) == len(STEPS),
        "failedStep": failed,
        "buildDigest": delivery.seen.get("digest"),
        "deliveryDirectory": str(delivery.root),
        "checks": checks,
        "unmeasured": list(UNMEASURED),
        "syntheticData": True,
        "stopFailures": delivery.seen.get("stopFailures", []),
    }


def _steps(delivery: Delivery, steps: Sequence[Step], checks: list[dict[str, Any]],
           out: TextIO) -> None:  # fmt: skip
    """Run the steps until one fails, each one's check appended to ``checks``."""
    from seif.proof.processes import StepFailed  # noqa: PLC0415  # not at `seif` start-up

    for number, (check_id, title, step) in enumerate(steps, start=1):
        out.write(f"[{number:2d}/{len(steps)}] {title} ... ")
        out.flush()
        began = time.monotonic()
        ok = False
        try:
            observed, ok = step(delivery), True
        except StepFailed as exc:
            observed = exc.observed
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop here, honestly
            observed = INTERRUPTED
        except Exception as exc:  # a step's own fault: recorded as what was seen, no more
            observed = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        checks.append({"id": check_id, "ok": ok, "observed": observed})
        out.write(f"{'ok' if ok else 'FAILED'} ({round(time.monotonic() - began, 2)} s)\n")
        if not ok:
            out.write(f"        {observed.get('error', '')}\n")
            return


def write_evidence(path: Path, evidence: dict[str, Any]) -> None:
    from policy.json.strict import dumps  # noqa: PLC0415

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(dumps(evidence, indent=2) + "\n")
    os.replace(tmp, path)


def summary(evidence: dict[str, Any], output: Path, *, kept: bool, out: TextIO) -> None:
    from seif.proof.steps import STEPS  # noqa: PLC0415  # not at `seif` start-up

    passed = sum(c["ok"] for c in evidence["checks"])
    verdict = "proved" if evidence["ok"] else f"FAILED at `{evidence['failedStep']}`"
    out.write(f"\n{verdict}: {passed}/{len(STEPS)} checks, build {evidence['buildDigest']}\n")
    out.write(f"evidence: {output}\n")
    where = evidence["deliveryDirectory"]
    out.write(f"delivery directory: {where} ({'kept' if kept else 'removed'})\n")
    out.write(f"unmeasured: {', '.join(evidence['unmeasured'])}\n")
