"""The server's own log on stderr, ``--log-format text|json`` (``seif serve``).

One line per event: start (the build and the tools bound), listening, refused start, each
executor readiness change, store errors and the HTTP layer's faults (the ``seif.*`` loggers,
warnings and above). ``text`` (the default) writes each event's message as it always has; ``json``
writes one JSON object per line: ``time`` (RFC 3339 UTC, milliseconds), ``level``, ``logger``,
``event`` and ``message``. No line carries a secret, a raw argument, an output or an approval
reason: the messages are the same ones, which never do (docs/security.md).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime

FORMATS = ("text", "json")
_format = "text"


class JsonLines(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the format: the format
            message = str(record.msg)
        line = {
            "time": when.replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", "log"),
            "message": message,
        }
        if record.exc_info and record.exc_info[0] is not None:  # its type, never its text
            line["error"] = record.exc_info[0].__name__
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def configure(log_format: str) -> None:
    """Send every logger's warnings (and the status events) to stderr as asked: the root
    logger's one handler, so that the executor client's, aiohttp's (details withheld), the MCP
    SDK's and asyncio's lines are in the same format as seif's own."""
    global _format  # one process serves one log format  # noqa: PLW0603 -- set once, at start
    _format = log_format if log_format in FORMATS else "text"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if _format == "json" else logging.Formatter("%(message)s"))
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
