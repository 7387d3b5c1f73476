"""PlatformClient: an agent's way to ABC (seed 001 Appendix A).

Inside an agent served by `platform_sdk.serve` (or `AgentServer`), a client
works for the invocation being handled: it uses that run's id, its run token
and the platform URL ABC sent, and passes the invoke's `traceparent` on, so
`PlatformClient(base_url=..., run_id=...)` needs no credential of its own.
Standalone, it uses the `api_key` given (or `ABC_API_KEY`).

It speaks HTTP to the gateway by default, or gRPC to a core with
`grpc_target="core:50051"` (or `ABC_GRPC_TARGET`; grpcio and protobuf needed).
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, Iterator, List, Optional, Union

from ._context import current
from ._transports import GrpcTransport, HttpTransport
from ._objects import wrap
from .errors import PlatformError, ToolError
from .types import AgentResponse, ChatMessage, ContextBlob, TranscriptMessage

_WAITING = {"pending", "created", "policy_checked", "waiting_approval", "approved", "dispatched", "running"}


class PlatformClient:
    """The LLM proxy (`chat`, OpenAI-shaped), tools, other agents, the transcript and the context store."""

    def __init__(self, base_url: Optional[str] = None, run_id: Optional[str] = None, api_key: Optional[str] = None,
                 session_id: Optional[str] = None, timeout: float = 60.0, grpc_target: Optional[str] = None):
        self._base_url = (base_url or os.environ.get("ABC_BASE_URL", "http://127.0.0.1:8080")).rstrip("/")
        self._run_id = run_id
        self._session_id = session_id
        self._api_key = api_key or os.environ.get("ABC_API_KEY")
        self.timeout = timeout
        target = grpc_target or os.environ.get("ABC_GRPC_TARGET")
        self._transport = GrpcTransport(target, self._headers, timeout) if target else HttpTransport(lambda: self.base_url, self._headers, timeout)
        self.chat = _Chat(self)
        self.tools = _Tools(self)
        self.agents = _Agents(self)
        self.transcript = _Transcript(self)
        self.context = _ContextStore(self)

    # The invocation being handled, when there is one, speaks for the client.
    @property
    def base_url(self) -> str:
        inv = current()
        return inv.base_url if inv else self._base_url

    @property
    def run_id(self) -> Optional[str]:
        inv = current()
        return inv.run_id if inv else self._run_id

    @property
    def session_id(self) -> Optional[str]:
        inv = current()
        return inv.session_id if inv else self._session_id

    def _headers(self) -> Dict[str, str]:
        inv = current()
        token = inv.token if inv else self._api_key
        headers: Dict[str, str] = {}
        if token:
            headers["authorization"] = f"Bearer {token}"
        if inv and inv.traceparent:
            headers["traceparent"] = inv.traceparent
        if self.run_id:
            headers["x-run-id"] = self.run_id
        return headers

    def close(self) -> None:
        """Closes the gRPC channel (clients of one target share it); nothing to do over HTTP."""
        getattr(self._transport, "close", lambda: None)()


class _Chat:
    def __init__(self, client: PlatformClient):
        self.completions = _Completions(client)


class _Completions:
    def __init__(self, client: PlatformClient):
        self._client = client

    def create(self, *, model: str, messages: List[ChatMessage], stream: bool = False, **params: Any) -> Any:
        """POST /v1/chat/completions, as the OpenAI SDK's: an object with `.choices[0].message.content`,
        or with `stream=True` an iterator of chunks with `.choices[0].delta.content`."""
        body = {"model": model, "messages": messages, **params}
        if not stream:
            return wrap(self._client._transport.chat(body))
        return _chunks(self._client._transport.chat_stream({**body, "stream": True}))


def _chunks(datas: Iterator[str]) -> Iterator[Any]:
    for data in datas:
        if data == "[DONE]":
            return
        chunk = json.loads(data)
        if "error" in chunk and "choices" not in chunk:
            e = chunk["error"]
            raise PlatformError(200, str(e.get("code") or "llm_error"), str(e.get("message", "")))
        yield wrap(chunk)


class _Tools:
    def __init__(self, client: PlatformClient):
        self._client = client

    def invoke(self, tool_name: str, args: Optional[Dict[str, Any]] = None, *, idempotency_key: Optional[str] = None,
               timeout_ms: Optional[int] = None, wait_timeout_s: float = 3600.0) -> Any:
        """Calls a tool for this run and returns its result, waiting through approvals and client tools.
        Raises ToolError when the call fails, is blocked, rejected or times out."""
        body: Dict[str, Any] = {"run_id": self._client.run_id, "args": args or {}}
        if idempotency_key:
            body["idempotency_key"] = idempotency_key
        if timeout_ms:
            body["timeout_ms"] = timeout_ms
        outcome = self._client._transport.invoke_tool(tool_name, body)
        call_id = outcome.get("tool_call_id", "")
        deadline = time.monotonic() + wait_timeout_s
        while outcome.get("status") in _WAITING:
            if time.monotonic() > deadline:
                raise ToolError("tool_timeout", f"{tool_name} did not finish within {wait_timeout_s} s", call_id)
            outcome = self._client._transport.wait_tool(call_id, 30_000)
        if outcome.get("status") == "succeeded":
            return outcome.get("result")
        error = outcome.get("error") or {}
        raise ToolError(str(error.get("code") or outcome.get("status")), str(error.get("message") or outcome.get("status")), call_id)


class _Agents:
    def __init__(self, client: PlatformClient):
        self._client = client

    def invoke(self, agent_id: str, message: Union[ChatMessage, str], *, context: Optional[Dict[str, Any]] = None) -> AgentResponse:
        """Calls another agent as a child of this run and waits for its answer."""
        text: List[str] = []
        for event, data in self.stream(agent_id, message, context=context):
            if event == "delta":
                text.append(data.get("text", ""))
            elif event == "done":
                return AgentResponse(run_id=data.get("run_id", ""), final_message=data.get("final_message") or "".join(text),
                                     text="".join(text), usage=data.get("usage") or {})
            elif event == "error":
                raise PlatformError(200, str(data.get("code", "agent_error")), str(data.get("message", "")))
        raise PlatformError(200, "agent_error", f"agent {agent_id} ended without done")

    def stream(self, agent_id: str, message: Union[ChatMessage, str], *, context: Optional[Dict[str, Any]] = None) -> Iterator[tuple]:
        """Calls another agent as a child of this run; yields its (event, data) as they arrive."""
        msg = {"role": "user", "content": message} if isinstance(message, str) else dict(message)
        body: Dict[str, Any] = {"parent_run_id": self._client.run_id, "input_message": msg}
        if context:
            body["context"] = context
        yield from self._client._transport.invoke_agent(agent_id, body)


class _Transcript:
    def __init__(self, client: PlatformClient):
        self._client = client

    def list(self, session_id: Optional[str] = None, limit: int = 100) -> List[TranscriptMessage]:
        """The session's messages, oldest first (this run's session by default)."""
        sid = str(session_id or self._client.session_id)
        return [TranscriptMessage.from_json(m) for m in self._client._transport.list_messages(sid, limit)]

    def append(self, role: str, content: str, session_id: Optional[str] = None, metadata: Optional[Dict[str, Any]] = None) -> TranscriptMessage:
        """Adds a message to the session's transcript, linked to this run."""
        sid = str(session_id or self._client.session_id)
        body: Dict[str, Any] = {"role": role, "content": content}
        if self._client.run_id:
            body["run_id"] = self._client.run_id
        if metadata:
            body["metadata"] = metadata
        return TranscriptMessage.from_json(self._client._transport.append_message(sid, body))


class _ContextStore:
    def __init__(self, client: PlatformClient):
        self._client = client

    def put(self, data: Any, *, owner_type: str = "session", owner_id: Optional[str] = None, context_key: Optional[str] = None,
            expected_version: Optional[int] = None) -> ContextBlob:
        """Stores a versioned blob (a new version of `context_key` when given; `expected_version` guards a race)."""
        body: Dict[str, Any] = {"owner_type": owner_type, "owner_id": owner_id or self._client.session_id, "data": data}
        if context_key:
            body["context_key"] = context_key
        if expected_version is not None:
            body["expected_version"] = expected_version
        return ContextBlob.from_json(self._client._transport.put_context(body))

    def get(self, context_key: str, version: Optional[int] = None) -> ContextBlob:
        return ContextBlob.from_json(self._client._transport.get_context(context_key, version))
