"""The approval server's configuration: the approvers file and the runner approval credential.

``approvers.json`` is a closed JSON format (docs/approval-server.md):

- ``approvers``: ``[{"id", "tokenRef", "objectives"?, "applications"?}]``, each ``tokenRef``
  ``env:SEIF_APPROVER_[A-Z0-9_]+`` (an approver's token is a person's credential, read from the
  environment of the approval server only);
- ``issuers``: approvers admitted by their identity provider's access token: the issuer fields
  of the credentials file (``servers.config.issuers``, but ``scopes`` and ``claims``), plus
  ``requireClaims`` (what makes a token's holder an approver) and ``nameClaim`` (what the page
  shows), and ``objectives``/``applications`` too.

The file needs one of the two. ``objectives`` and ``applications`` narrow what an approver sees
and decides (:class:`Narrowing`; absent: everything). Every problem of the file is reported
together in one :class:`~servers.config.files.ConfigError` (codes in docs/runtime-config.md); no
token appears in a message. Approvers are authenticated as application credentials are: keyed
digests of one length, every approver compared on every request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from policy.json.pointer import join
from servers.config.check import Check, same, show
from servers.config.endpoints import endpoint_problems
from servers.config.files import Credential, Credentials, approval_token, distinct, refusal
from servers.config.issuers import CLAIM_NAME, CODE, Issuer, each_issuer, issuer_of

APPROVER_ENV = re.compile(r"SEIF_APPROVER_[A-Z0-9_]+")
ISSUER_KEYS = ("id", "issuer", "audience", "requireClaims")
ISSUER_OPTIONAL = (
    *("jwksUri", "jwksFile", "algorithms", "leewaySeconds"),
    *("nameClaim", "objectives", "applications"),
)
MAX_REQUIRED_CLAIMS = 8
MAX_CLAIM_TEXT = 256

ClaimWanted = str | int | bool
"""What a required claim must equal (or, a list claim, hold)."""


@dataclass(frozen=True, slots=True)
class Narrowing:
    """What one approver sees and decides: the calls of ``objectives`` asked by
    ``applications`` (a credential id, or an issuer id: every client of that issuer); None:
    any."""

    objectives: frozenset[str] | None = None
    applications: frozenset[str] | None = None

    @property
    def everything(self) -> bool:
        """Whether it admits every call (neither list given)."""
        return self.objectives is None and self.applications is None

    def admits(self, objective: str, application: str) -> bool:
        """Whether a call of ``objective``, asked by ``application`` (the id of what resolved
        its context: a credential id, or ``<issuer id>:<client id>``), is this approver's."""
        if self.objectives is not None and objective not in self.objectives:
            return False
        if self.applications is None:
            return True
        issuer, colon, _client = application.partition(":")
        return application in self.applications or bool(colon and issuer in self.applications)


EVERYTHING = Narrowing()


@dataclass(frozen=True, slots=True)
class ApproverIssuer:
    """An identity provider whose tokens admit approvers: a token of ``issuer`` whose claims
    hold every one of ``require`` (a claim equal to the value, or a list claim containing it)."""

    issuer: Issuer
    """Its fields; its ``claims`` are the claims read: those of ``require`` and the name's."""
    require: Mapping[str, ClaimWanted]
    name_claim: str | None = None
    narrowing: Narrowing = EVERYTHING

    def admits(self, claims: Mapping[str, object]) -> bool:
        """Whether a token's ``claims`` make its holder an approver."""
        return all(_holds(claims.get(name), wanted) for name, wanted in self.require.items())


def _holds(value: object, wanted: ClaimWanted) -> bool:
    if isinstance(value, tuple | list):
        return any(_same(v, wanted) for v in value)
    return _same(value, wanted)


def _same(value: object, wanted: ClaimWanted) -> bool:
    """Equal and of one type: ``true`` is not ``1``, ``"1"`` is not ``1``."""
    return type(value) is type(wanted) and value == wanted


@dataclass(frozen=True, slots=True)
class Approvers:
    """The approvers of one file: those with tokens (``static``, each with its
    :class:`Narrowing` in ``narrowing``) and the issuers that admit approvers."""

    static: Credentials
    narrowing: Mapping[str, Narrowing] = field(default_factory=lambda: MappingProxyType({}))
    issuers: tuple[ApproverIssuer, ...] = ()


def load_approvers(path: str | Path, env: Mapping[str, str]) -> Approvers:
    """The approvers of ``path`` (with their tokens, read from ``env``) and its issuers."""
    check = Check(str(path), env, _no_keychain)
    root = check.object(check.document(path), "", (), ("approvers", "issuers"))
    found: list[Credential] = []
    narrowing: dict[str, Narrowing] = {}
    if root is not None and "approvers" in root:
        entries = check.array(root["approvers"], "/approvers", "APPROVERS_EMPTY", "no approver")
        for i, item in enumerate(entries):
            pointer = f"/approvers/{i}"
            parsed = _approver(item, pointer, check)
            if parsed is None:
                continue
            approver, narrowed = parsed
            distinct(approver, found, pointer, check)
            found.append(approver)
            narrowing[approver.id] = narrowed
    elif root is not None and "issuers" not in root:
        check.error("MISSING_KEY", "", "missing key `approvers` (or `issuers`)")
    trusted: tuple[ApproverIssuer, ...] = ()
    if root is not None and "issuers" in root:
        folder = Path(path).absolute().parent  # a relative `jwksFile` starts here
        taken = [c.id for c in found]

        def one(item: Any, pointer: str) -> ApproverIssuer | None:
            return _issuer(item, pointer, check, folder)

        trusted = each_issuer(root["issuers"], check, taken, one, lambda a: a.issuer)
    check.done()
    return Approvers(Credentials(found), MappingProxyType(narrowing), trusted)


def _no_keychain(_service: str, _name: str) -> str | None:  # pragma: no cover - never called
    raise AssertionError("approver tokens are read from the environment only")


def _approver(value: Any, pointer: str, check: Check) -> tuple[Credential, Narrowing] | None:
    item = check.object(value, pointer, ("id", "tokenRef"), ("objectives", "applications"))
    if item is None:
        return None
    before = len(check.problems)
    ident = check.identifier(item["id"], f"{pointer}/id", "INVALID_ID") if "id" in item else None
    token = _token(item["tokenRef"], f"{pointer}/tokenRef", check) if "tokenRef" in item else None
    narrowed = _narrowing(item, pointer, check)
    if len(check.problems) > before or ident is None or token is None:
        return None
    return Credential(id=ident, scopes=frozenset(), token=token), narrowed


def _narrowing(item: Mapping[str, Any], pointer: str, check: Check) -> Narrowing:
    """An approver's ``objectives`` and ``applications`` (ids; the approval server has no
    build to check them against)."""
    found: dict[str, frozenset[str] | None] = {"objectives": None, "applications": None}
    for key, what in (("objectives", "an objective"), ("applications", "an application")):
        if key in item:
            listed = check.id_list(item[key], join(pointer, key), what)
            found[key] = None if listed is None else frozenset(listed)
    return Narrowing(found["objectives"], found["applications"])


def _issuer(value: Any, pointer: str, check: Check, folder: Path) -> ApproverIssuer | None:
    item = check.object(value, pointer, ISSUER_KEYS, ISSUER_OPTIONAL)
    if item is None:
        return None
    before = len(check.problems)
    require = _required(item, pointer, check) if "requireClaims" in item else None
    name = None
    if "nameClaim" in item:
        at = join(pointer, "nameClaim")
        name = check.string(item["nameClaim"], at)
        if name is not None and not CLAIM_NAME.fullmatch(name):
            check.error(
                CODE, at, f"{show(name)} is not a claim name (`^[A-Za-z0-9_.:/-]{{1,64}}$`)"
            )
    applications = None
    if "applications" in item:
        at = join(pointer, "applications")
        applications = check.id_list(item["applications"], at, "an application")
    read = tuple(dict.fromkeys([*(require or {}), *([name] if name else [])]))
    issuer = issuer_of(item, pointer, check, folder, None, claims=read)  # and its `objectives`
    if len(check.problems) > before or issuer is None or require is None:
        return None
    narrowing = Narrowing(
        None if issuer.objectives is None else frozenset(issuer.objectives),
        None if applications is None else frozenset(applications),
    )
    return ApproverIssuer(issuer, MappingProxyType(require), name, narrowing)


def _required(item: Mapping[str, Any], pointer: str, check: Check) -> dict[str, ClaimWanted] | None:
    """``requireClaims``: claim name -> a string, an integer or a boolean; at least one (an
    issuer none of whose users is refused is every user an approver)."""
    at = join(pointer, "requireClaims")
    mapping = check.object(item["requireClaims"], at, (), None)
    if mapping is None:
        return None
    if not mapping:
        message = 'require a claim (`{"groups": "approvers"}`): not every user approves'
        check.error(CODE, at, message)
    if len(mapping) > MAX_REQUIRED_CLAIMS:
        check.error(CODE, at, f"at most {MAX_REQUIRED_CLAIMS} claims may be required")
    found: dict[str, ClaimWanted] = {}
    for name, wanted in mapping.items():
        where = join(at, name)
        if not CLAIM_NAME.fullmatch(name):
            check.error(
                CODE, where, f"{show(name)} is not a claim name (`^[A-Za-z0-9_.:/-]{{1,64}}$`)"
            )
        elif _wantable(wanted):
            found[name] = wanted
        else:
            message = (
                f"expected a string of 1 to {MAX_CLAIM_TEXT} characters, an integer or a boolean"
            )
            check.error(CODE, where, message)
    return found


def _wantable(value: Any) -> bool:
    """A value a claim may be required to equal: a string of 1 to 256 characters, an integer
    or a boolean (JSON's; a fraction is not)."""
    if isinstance(value, str):
        return 0 < len(value) <= MAX_CLAIM_TEXT
    return isinstance(value, bool | int)


def _token(value: Any, pointer: str, check: Check) -> str | None:
    text = check.string(value, pointer)
    if text is None:
        return None
    kind, _, name = text.partition(":")
    if kind != "env" or not APPROVER_ENV.fullmatch(name):
        shown = f"`{text}`" if re.fullmatch(r"env:[A-Z_][A-Z0-9_]{0,127}", text) else "this value"
        message = f"{shown} is not an approver's token reference; use `env:SEIF_APPROVER_NAME`"
        check.error("APPROVER_TOKEN_REF_INVALID", pointer, message)
        return None
    return check.secret(text, pointer, tool=False)


def runner_token(env: Mapping[str, str], approvers: Approvers) -> str:
    """``SEIF_CONTEXT_TOOL_APPROVAL_TOKEN``, which the approval server holds for the runtime:
    required, and distinct from every approver's token (compared in constant time)."""

    def clash(token: str) -> tuple[str, str]:
        owner = next(c.id for c in approvers.static if same(token, c.token))
        message = f"approver `{owner}` has the runner approval token; give the approver its own"
        return "APPROVER_TOKEN_NOT_DISTINCT", message

    token = approval_token(env, approvers.static, required=True, clash=clash)
    assert token is not None  # required: a missing one is refused
    return token


def runtime_url(text: str) -> str:
    """``--runtime``: an absolute ``https://`` URL, or ``http://`` to a loopback host (the runner
    approval credential travels to it), with no user name, query or fragment."""
    problems = endpoint_problems(text, needs_secret=False)
    if problems:
        raise refusal("--runtime", *problems)
    return text.rstrip("/")
