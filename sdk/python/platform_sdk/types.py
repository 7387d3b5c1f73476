"""The shapes the SDK reads and returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, TypedDict


class ChatMessage(TypedDict, total=False):
    role: str
    content: str


@dataclass(frozen=True)
class ToolCallRecord:
    """A tool call a run already made, as a resumed agent is told."""

    tool_call_id: str
    tool_name: str
    args: Dict[str, Any]
    status: str
    result: Any = None
    error: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class ResumeInfo:
    """`context.resume`: why an invoke continues a run, and where the run stands."""

    reason: str
    streamed_text: str = ""
    last_cursor: str = "0"
    tool_calls: List[ToolCallRecord] = field(default_factory=list)

    @classmethod
    def from_json(cls, r: Dict[str, Any]) -> "ResumeInfo":
        calls = [ToolCallRecord(**{k: c.get(k) for k in ("tool_call_id", "tool_name", "args", "status", "result", "error")}) for c in r.get("tool_calls") or []]
        return cls(reason=str(r.get("reason", "")), streamed_text=str(r.get("streamed_text") or ""), last_cursor=str(r.get("last_cursor") or "0"), tool_calls=calls)


@dataclass(frozen=True)
class AgentResponse:
    """A child agent's answer."""

    run_id: str
    final_message: str
    text: str
    usage: Dict[str, Any]


@dataclass(frozen=True)
class TranscriptMessage:
    message_id: str
    session_id: str
    run_id: Optional[str]
    role: str
    content: str
    created_at: int
    metadata: Optional[Dict[str, Any]] = None

    @classmethod
    def from_json(cls, m: Dict[str, Any]) -> "TranscriptMessage":
        return cls(m["message_id"], m["session_id"], m.get("run_id"), m["role"], m["content"], m.get("created_at", 0), m.get("metadata"))


@dataclass(frozen=True)
class ContextBlob:
    context_key: str
    owner_type: str
    owner_id: str
    version: int
    data: Any

    @classmethod
    def from_json(cls, b: Dict[str, Any]) -> "ContextBlob":
        return cls(b["context_key"], b["owner_type"], b["owner_id"], int(b["version"]), b.get("data"))


@dataclass(frozen=True)
class Tool:
    """A tool as registered with ABC (POST /v1/tools/register): an HTTP webhook, a builtin or a client tool."""

    name: str
    kind: str = "http"
    endpoint: Optional[str] = None
    description: str = ""
    input_schema: Optional[Dict[str, Any]] = None
    output_schema: Optional[Dict[str, Any]] = None
    side_effect: bool = False
    timeout_ms: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name, "kind": self.kind, "side_effect": self.side_effect}
        for key in ("endpoint", "description", "input_schema", "output_schema", "timeout_ms"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out
