"""The held calls of one runtime (:class:`~servers.store.interface.HeldStore`): shared with no
one. The runtime's own memory (``servers.runtime.held``) holds every call there is, so there is
nothing more to keep, to list or to tell another process."""

from __future__ import annotations

from servers.store.interface import HeldPage
from servers.store.rows import HeldCall


class LocalHeld:
    shared = False
    poll_s: float | None = None

    def put(self, item: HeldCall) -> bool:
        del item
        return True

    def drop(self, context_ref: str, call_id: str) -> None:
        del context_ref, call_id

    def drop_own(self, item: HeldCall) -> None:
        del item

    def expire_own(self, item: HeldCall, now: int) -> bool:
        del item, now
        return True

    def drop_matching(self, context_ref: str, call_id: str, tool: str, fingerprint: str) -> None:
        del context_ref, call_id, tool, fingerprint

    def mark_gone(self, item: HeldCall) -> None:
        del item

    def drop_tool(self, context_ref: str, tool: str) -> None:
        del context_ref, tool

    def reject(self, context_ref: str, call_id: str, now: int) -> None:
        del context_ref, call_id, now

    def note(self, context_ref: str, call_id: str, outcome: str, now: int) -> None:
        del context_ref, call_id, outcome, now

    def outcome(self, context_ref: str, call_id: str) -> str | None:
        del context_ref, call_id
        return None

    def get(self, context_ref: str, call_id: str, now: int) -> HeldCall | None:
        del context_ref, call_id, now
        return None

    def holds(self, context_ref: str, now: int) -> bool:
        del context_ref, now
        return False

    def page(self, now: int, after: str | None, limit: int, max_bytes: int) -> HeldPage:
        del now, after, limit, max_bytes
        return [], False

    def tidy(self, now: int) -> None:
        del now
