"""The errors the SDK raises: ABC's error shape, and a tool call that did not succeed."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional


class PlatformError(Exception):
    """An error answer of ABC: `{"error": {code, category, message, retryable, ...}}`."""

    def __init__(self, status: int, code: str, message: str, *, category: str = "", retryable: bool = False,
                 retry_after_seconds: Optional[float] = None, details: Optional[Dict[str, Any]] = None, trace_id: str = ""):
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.category = category
        self.retryable = retryable
        self.retry_after_seconds = retry_after_seconds
        self.details = details or {}
        self.trace_id = trace_id

    @classmethod
    def from_body(cls, status: int, raw: bytes) -> "PlatformError":
        try:
            e = json.loads(raw)["error"]
        except (ValueError, KeyError, TypeError):
            return cls(status, "http_error", f"HTTP {status}: {raw[:200].decode('utf-8', 'replace')}")
        return cls(status, str(e.get("code", "error")), str(e.get("message", "")), category=e.get("category", ""),
                   retryable=bool(e.get("retryable")), retry_after_seconds=e.get("retry_after_seconds"),
                   details=e.get("details"), trace_id=e.get("trace_id", ""))


class ToolError(Exception):
    """A tool call that failed, was blocked, rejected, or timed out; `code` says which."""

    def __init__(self, code: str, message: str, tool_call_id: str = ""):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.tool_call_id = tool_call_id
