"""JSON and server-sent events over HTTP, on the standard library."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator, Optional, Tuple

from .errors import PlatformError


def request(method: str, url: str, headers: Dict[str, str], body: Any = None, timeout: float = 60.0) -> Any:
    """Sends a JSON request; returns the decoded answer, raises PlatformError for ABC's error shape."""
    with _open(method, url, headers, body, timeout) as res:
        raw = res.read()
    return json.loads(raw) if raw else None


def stream(method: str, url: str, headers: Dict[str, str], body: Any = None, timeout: float = 300.0) -> Iterator[Tuple[str, str]]:
    """Sends a request and yields its answer's server-sent events as (event, data)."""
    res = _open(method, url, {**headers, "accept": "text/event-stream"}, body, timeout)
    try:
        yield from events(res)
    finally:
        res.close()


def events(lines: Any) -> Iterator[Tuple[str, str]]:
    """Parses server-sent events from byte lines: (event name, joined data), `message` when unnamed."""
    event, data = "", []
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
    if data:
        yield event or "message", "\n".join(data)


def _open(method: str, url: str, headers: Dict[str, str], body: Any, timeout: float):
    data: Optional[bytes] = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers = {**headers, "content-type": "application/json"}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        return urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        raise PlatformError.from_body(e.code, e.read()) from None
    except urllib.error.URLError as e:
        raise PlatformError(0, "unavailable", f"cannot reach ABC at {url}: {e.reason}", retryable=True) from None
