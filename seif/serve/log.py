"""The server's own log on stderr, ``--log-format text|json`` (``seif serve``).

One line per event: start (the build and the tools bound), listening, refused start, each
executor readiness change, store errors and the HTTP layer's faults (the ``seif.*`` loggers,
warnings and above). ``text`` (the default) writes each event's message as it always has; ``json``
writes one JSON object per line: ``time`` (RFC 3339 UTC, milliseconds), ``level``, ``logger``,
``event`` and ``message``. No line carries a secret, a raw argument, an output or an approval
reason: the messages are the same ones, which never do (docs/security.md).

One event is one line, whatever its message holds: ``text`` writes a line break or any other
control character of a message escaped (``\\n``, ``\\x1b``, ``\\u2028``), and an exception by
its type only, as ``json`` does; ``json`` escapes them inside its strings.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime

FORMATS = ("text", "json")
_format = "text"


_BREAKS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Control characters, and the line and paragraph separators (a line ends at any of them for
some reader: ``str.splitlines`` breaks at ``\\x1c`` and ``\\x85`` too)."""
_JSON_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}
"""What ``json.dumps`` leaves raw of :data:`_BREAKS` (it escapes the C0 controls itself)."""


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except (TypeError, ValueError):  # arguments that do not fit the format: the format
        return str(record.msg)


def _error(record: logging.LogRecord) -> str | None:
    """The type of the record's exception, if it has one (its type, never its text)."""
    if record.exc_info and record.exc_info[0] is not None:
        return record.exc_info[0].__name__
    return None


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}.get(
        code, f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    )


class OneLine(logging.Formatter):
    """The ``text`` format: a record's message on one line, its control characters escaped;
    an exception by its type."""

    def format(self, record: logging.LogRecord) -> str:
        error = _error(record)
        message = _message(record) if error is None else f"{_message(record)} ({error})"
        return _BREAKS.sub(_escaped, message)


class JsonLines(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        line = {
            "time": when.replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", "log"),
            "message": _message(record),
        }
        error = _error(record)
        if error is not None:
            line["error"] = error
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).translate(_JSON_BREAKS)


def configure(log_format: str) -> None:
    """Send every logger's warnings (and the status events) to stderr as asked: the root
    logger's one handler, so that the executor client's, aiohttp's (details withheld), the MCP
    SDK's and asyncio's lines are in the same format as seif's own."""
    global _format  # one process serves one log format  # noqa: PLW0603 -- set once, at start
    _format = log_format if log_format in FORMATS else "text"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if _format == "json" else OneLine())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("seif.serve").setLevel(logging.INFO)  # the status events


def status(event: str) -> Callable[[str], None]:
    """A ``say`` for the status lines of ``event`` (``start``, ``readiness``, ...)."""

    def say(text: str) -> None:
        if _format == "json":
            logging.getLogger("seif.serve").info(text, extra={"event": event})
        else:
            sys.stderr.write(text + "\n")

    return say


def listening(text: str) -> None:
    """The ``listening`` event (stdout says it in every format; this is the log's line)."""
    if _format == "json":
        logging.getLogger("seif.serve").info(text, extra={"event": "listening"})


def refused(text: str) -> None:
    """A refused start's line (``event``: ``refused``), before or after :func:`configure`."""
    if _format == "json":
        logging.getLogger("seif.serve").error(text, extra={"event": "refused"})
    else:
        sys.stderr.write(text + "\n")
