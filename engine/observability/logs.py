"""One log format for the whole process (flowtrail's, uvicorn's, litestar's): text or JSON Lines."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import msgspec

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LIBRARY_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "litestar")
HTTP_CLIENT_LOGGERS = ("httpx", "httpcore")
"""Quiet below WARNING whatever FLOWTRAIL_LOG_LEVEL says: at DEBUG they copy a model endpoint's response headers
(and httpx names every request URL at INFO)."""
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "color_message"}
"""Attributes every record has (uvicorn adds `color_message`): the rest are the `extra` context fields."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line: `ts`, `level`, `logger`, `msg`, the record's `extra` fields, and `exc` if any."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update((key, value) for key, value in vars(record).items() if key not in _RECORD_FIELDS)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return msgspec.json.encode(line, enc_hook=str).decode()


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value...`: the record's `extra` fields follow the message."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The message with its context fields."""
        fields = " ".join(f"{key}={value}" for key, value in vars(record).items() if key not in _RECORD_FIELDS)
        line = super().formatMessage(record)
        return f"{line} {fields}" if fields else line


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of a FLOWTRAIL_LOG_FORMAT value (`text` or `json`)."""
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure_logging(log_format: str = "text", level: str = "INFO") -> None:
    """Send every logger of the process to one stderr handler in the chosen format and level."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in LIBRARY_LOGGERS:
        library = logging.getLogger(name)
        library.handlers.clear()
        library.propagate = True
    for name in HTTP_CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def uvicorn_logging(level: str = "INFO") -> dict[str, Any]:
    """uvicorn's logging options: no configuration of its own (it keeps ours), its access log off (ours replaces it)."""
    return {"log_config": None, "access_log": False, "log_level": level.lower()}
