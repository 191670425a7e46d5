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
        line = {
            "time": when.replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", "log"),
            "message": record.getMessage(),
        }
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def configure(log_format: str) -> None:
    """Send the ``seif.*`` loggers' warnings (and the status events) to stderr as asked."""
    global _format  # one process serves one log format  # noqa: PLW0603 -- set once, at start
    _format = log_format if log_format in FORMATS else "text"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if _format == "json" else logging.Formatter("%(message)s"))
    seif = logging.getLogger("seif")
    seif.handlers[:] = [handler]
    seif.propagate = False
    seif.setLevel(logging.INFO)
    for name in ("seif.http", "seif.runtime", "seif.mcp"):  # their info lines stay quiet
        logging.getLogger(name).setLevel(logging.WARNING)


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
