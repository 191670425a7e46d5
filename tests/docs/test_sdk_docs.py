"""docs/sdk.md stays true: its quickstart runs as written against a real runtime and prints what
the page says, its import block imports, and both clients have every method of the SDK spec
with the spec's exact keyword names."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import seif
from seif import RuntimeClient, SyncRuntimeClient
from tests.support.paths import ROOT
from tests.support.runtime_harness import APP_TOKEN, stack_in_thread

DOC = ROOT / "docs" / "sdk.md"


def blocks(section: str) -> list[tuple[str, str]]:
    """The fenced blocks (language, text) of one section of docs/sdk.md (its title or a
    ``## `` heading), up to the next ``## ``."""
    text = "\n" + DOC.read_text(encoding="utf-8")
    found = re.search(rf"\n#{{1,2}} {re.escape(section)}\n", text)
    assert found is not None, section
    start = found.start()
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else len(text)]
    return re.findall(r"```(\w*)\n(.*?)```", body, flags=re.DOTALL)


def test_the_quickstart_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = blocks("Quickstart")
    code = next(text for lang, text in found if lang == "python")
    expected = next(text for lang, text in found if lang == "")
    with stack_in_thread(tmp_path) as threaded:
        monkeypatch.setenv("SEIF_URL", threaded.stack.runtime)
        monkeypatch.setenv("SEIF_APP_TOKEN", APP_TOKEN)
        exec(compile(code, str(DOC), "exec"), {"__name__": "__main__"})
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    assert printed == expected.strip().splitlines()


def test_the_names_import() -> None:
    names = blocks("The Python SDK")[0][1]
    namespace: dict[str, object] = {}
    exec(names, namespace)
    for name in ("RuntimeClient", "SyncRuntimeClient", "ContextDeliveryGateway", "Receipt"):
        assert namespace[name] is getattr(seif, name)
    assert set(seif.__all__) <= set(dir(seif))
    for name in seif.__all__:
        assert getattr(seif, name) is not None


SPEC = {  # shared/spec/sdk.md: method -> (positional parameters, keyword-only parameters)
    "resolve": (
        ["objective"],
        ["consumer", "environment", "deployment", "trace_id", "turn_id"],
    ),
    "resolve_context": (
        ["objective"],
        ["consumer", "environment", "deployment", "trace_id", "turn_id"],
    ),
    "execute": (["context_ref", "tool", "call_id", "arguments"], ["approval_id", "turn_id"]),
    "execute_tool_by_name": (
        ["context", "name", "call_id", "arguments"],
        ["approval_id", "turn_id"],
    ),
    "start_turn": ([], []),
    "complete_turn": (["turn_id", "outcome"], []),
    "report_disclosure": (["context_ref", "tools"], ["turn_id"]),
    "approval_status": (["context_ref", "call_id"], []),
    "wait_for_approval": (["context_ref", "call_id"], ["timeout_s"]),
    "run_agent_turn": (["request", "handler"], []),
}


@pytest.mark.parametrize("client", [RuntimeClient, SyncRuntimeClient])
def test_every_method_of_the_spec_with_its_keywords(client: type) -> None:
    init = inspect.signature(client.__init__).parameters
    assert list(init)[:3] == ["self", "base_url", "token"]
    assert init["timeout_s"].kind is inspect.Parameter.KEYWORD_ONLY
    assert init["timeout_s"].default == 30.0
    for method, (positional, keywords) in SPEC.items():
        parameters = inspect.signature(getattr(client, method)).parameters
        given = [p for p in parameters.values() if p.name != "self"]
        assert [p.name for p in given if p.kind is p.POSITIONAL_OR_KEYWORD] == positional, method
        keyword_only = [p.name for p in given if p.kind is p.KEYWORD_ONLY]
        assert keyword_only[: len(keywords)] == keywords, method
        is_async = inspect.iscoroutinefunction(getattr(client, method))
        assert is_async is (client is RuntimeClient), method


def test_the_sdk_is_a_client_only() -> None:
    """The SDK and its framework adapters import nothing of the server (nor the compiler):
    they are clients of the HTTP API. And `import seif` (the command line's package) does not
    load the HTTP client."""
    probe = (
        "import sys, seif; lazy = 'aiohttp' not in sys.modules; "
        "import seif.sdk, seif.formats; from seif import RuntimeClient; "
        "import seif.integrations.langchain, seif.integrations.openai_agents; "
        "import seif.integrations.langgraph; "
        "print(lazy, sorted({m.split('.')[0] for m in sys.modules} & {'servers', 'compiler'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=DOC.parent.parent,
    ).stdout
    assert out.split() == ["True", "[]"]
