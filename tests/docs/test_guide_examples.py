"""Every example of the guides (README.md, docs/*.md) runs as written, on loopback: each shell
or Python block is marked as a step of an example or says why it is not run
(:mod:`tests.support.guide_examples`), and each example's steps run in order in one bash and
exit 0. An example with a test of its own that also compares its answers
(:data:`DEDICATED`) is run there."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.guide_examples import examples, run_example, unmarked
from tests.support.node_support import check_installed

DEDICATED = {
    ("docs/runtime-walkthrough.md", "walkthrough"): "tests/docs/test_runtime_walkthrough.py",
}
EXAMPLES = {key: steps for key, steps in examples().items() if key not in DEDICATED}


def test_every_shell_and_python_block_of_the_guides_is_marked() -> None:
    assert unmarked() == [], "mark each: <!-- example: NAME --> or <!-- not run: REASON -->"


def test_the_dedicated_examples_exist() -> None:
    assert set(DEDICATED) <= set(examples())


@pytest.mark.parametrize("key", sorted(EXAMPLES), ids=[f"{g}:{n}" for g, n in sorted(EXAMPLES)])
def test_the_example_runs_as_written(key: tuple[str, str], tmp_path: Path) -> None:
    for tool in ("curl", "node"):
        if shutil.which(tool) is None:  # as the other walkthroughs: required in CI
            (pytest.fail if os.environ.get("CI") else pytest.skip)(f"the examples need {tool}")
    assert (Path(sys.prefix) / "bin" / "seif").exists(), "run from the project's venv"
    if any("npx " in step.text for step in EXAMPLES[key]):
        check_installed()  # npx finds the pinned packages of tests/node, without the network
    code, out, err = run_example(EXAMPLES[key], tmp_path)
    assert code == 0, f"{key}: exit {code}\n--- stdout\n{out[-4000:]}\n--- stderr\n{err[-4000:]}"
