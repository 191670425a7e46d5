"""What the tests of the principal as a policy input share: a build of the reference project
with rules on ``principal`` (the runtime and MCP tests serve it), two users of one application
and their issuer tokens (``tests.support.identity``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from compiler import compile_project
from compiler.builds.build import write_build
from tests.support.identity import claims, rsa_key, token
from tests.support.paths import ROOT

REFERENCE = ROOT / "reference" / "agent-tools" / "context-project.json"
KEY = rsa_key("k1")
"""The provider's signing key (serve it with ``tests.support.identity.provider([KEY])``)."""
ALICE, BOB = "alice-7d41-subject", "bob-1c2e-subject"
"""Two users of the application ``tutor-web``: Alice in the support and authors groups, Bob a
learner. Neither subject may ever be written to disk."""
SUPPORT_ONLY = "only the support group reads entries here"


def write_principal_build(root: Path) -> None:
    """``root/build``: the reference project with rules on the principal. Authoring discloses
    ``search-knowledge`` to the authors group only and lets only the support group read an
    entry (a ``DENY`` condition on ``principal.claims.groups``); learning hides
    ``search-knowledge`` from one subject (a rule on ``principal.subject``, which replay
    cannot reproduce from a fingerprint). Written before ``running_stack`` runs on ``root``,
    it is the build served (the reference executor serves it: the tools are the same)."""
    document = json.loads(REFERENCE.read_text(encoding="utf-8"))
    rules = {p["id"]: p["toolRules"] for p in document["profiles"]}
    groups = "has(principal.claims.groups) && '{}' in principal.claims.groups"
    rules["authoring"][0]["conditions"] = [
        {"when": "!(" + groups.format("support") + ")", "then": "DENY", "reason": SUPPORT_ONLY}
    ]
    rules["authoring"][1]["when"] = groups.format("authors")
    rules["learner"][1]["when"] = "principal.subject != 'blocked-subject'"
    root.mkdir(parents=True, exist_ok=True)
    project = root / "principal-project.json"
    project.write_text(json.dumps(document), encoding="utf-8")
    write_build(compile_project(project), root / "build")


def token_of(subject: str, groups: list[str], jti: str = "j-1") -> str:
    """An access token of ``tutor-web`` for ``subject`` in ``groups``, valid now, with the
    resolve, execute and traces scopes."""
    scope = "seif.resolve seif.execute seif.traces"
    return token(KEY, claims(int(time.time()), sub=subject, groups=groups, jti=jti, scope=scope))


def bearer_of(subject: str, groups: list[str], jti: str = "j-1") -> dict[str, str]:
    return {"Authorization": f"Bearer {token_of(subject, groups, jti)}"}
