"""The decision log as the runtime writes it: every record's envelope (the event, the time, the
build, the binding's environment and revision, the context's coordinates) made in one place.

Records carry ids, digests, fingerprints, reason codes and explanations; never raw arguments,
outputs, approval reasons or secrets (``servers.log.encoding`` refuses a record that would).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compiler.builds.build import Build
from policy.engine.decision import Decision
from servers.config.files import Bindings
from servers.log.decision_log import Admitted, admit
from servers.runtime import events, redact
from servers.store.interface import RecordLog


@dataclass(frozen=True, eq=False)
class Recorder:
    """Builds and appends the runtime's decision-log records."""

    build: Build
    bindings: Bindings
    log: RecordLog
    clock: Callable[[], int]
    fingerprint_key: bytes = field(repr=False)

    def record(
        self, event: str, context_ref: str | None, coords: Mapping[str, Any], **fields: Any
    ) -> dict[str, Any]:
        """The record of ``event`` now, with its envelope."""
        record = {
            "event": event,
            "at": self.clock(),
            "build": self.build.digest,
            "environment": self.bindings.environment,
            "bindingRevision": self.bindings.revision,
            "coordinates": events.coordinates_field(coords),
            **fields,
        }
        if context_ref is not None:
            record["contextRef"] = context_ref
        return record

    def prepared(
        self, event: str, context_ref: str | None, coords: Mapping[str, Any], **fields: Any
    ) -> Admitted:
        """A record checked now, for the store to log right after its write commits (or to
        append with :meth:`append`)."""
        return admit(self.record(event, context_ref, coords, **fields))

    async def write(
        self, event: str, context_ref: str | None, coords: Mapping[str, Any], **fields: Any
    ) -> None:
        """Append the record of ``event`` now: written and fsynced (grouped) off the loop."""
        await self.log.append_async(self.record(event, context_ref, coords, **fields))

    async def append(self, record: Admitted) -> None:
        """Append a record :meth:`prepared` already checked."""
        await self.log.append_admitted(record)

    def decision_fields(self, decision: Decision) -> dict[str, Any]:
        """The fields of a call decision's record (``DENIED``, ``INTENT``): what the engine
        said and why, the arguments' fingerprint, never the arguments."""
        tool = self.build.project.tool_by_id.get(decision.tool)
        parameters = tool.parameters if tool is not None else None
        fields = events.decision_fields(decision, parameters, self.fingerprint_key)
        if tool is None:  # neither a tool id nor a function name: what the client sent, cut
            fields["tool"] = redact.shortened(decision.tool)
        return fields
