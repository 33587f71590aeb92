"""Durations as people write them: 90s, 30m, 24h, 1h30m, or a bare number of seconds; and the UTC
time a record carries (`now_iso`)."""

from __future__ import annotations

import datetime as dt
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | float | int) -> float:
    """Seconds in `text`; ValueError with the expected forms when it is not a duration."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        raw = str(text).strip().lower()
        if re.fullmatch(r"\d+(?:\.\d+)?", raw):
            seconds = float(raw)
        else:
            parts = _PART.findall(raw)
            if not parts or _PART.sub("", raw).strip():
                raise ValueError(f"expected a duration like 90s, 30m, 24h or 1h30m, got {text!r}")
            seconds = sum(float(number) * _SECONDS[unit] for number, unit in parts)
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {text!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """12:34 under an hour, 3:02:05 above; for progress lines and report sentences."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def now_iso() -> str:
    """Now, in UTC, to the second (ISO 8601): the time a run, a journal or a record starts or ends."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
