"""How a PlatformClient reaches ABC: HTTP through the gateway (standard
library), or gRPC straight to a core (grpcio, with the stubs vendored in
`_proto`). Both answer in the HTTP API's JSON shapes."""
from __future__ import annotations

import json
import threading
import urllib.parse
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from . import _http
from .errors import PlatformError

try:  # the gRPC transport's optional dependencies; the HTTP transport needs none
    import grpc
    from google.protobuf import json_format, struct_pb2

    from ._proto.abc.common.v1 import error_pb2, types_pb2
    from ._proto.abc.orchestrator.v1 import (agent_pb2, agent_pb2_grpc, context_pb2, context_pb2_grpc, llm_pb2, llm_pb2_grpc, session_pb2,
                                             session_pb2_grpc, tool_pb2, tool_pb2_grpc)
except ImportError:  # pragma: no cover - exercised where grpcio is not installed
    grpc = None  # type: ignore[assignment]

Headers = Callable[[], Dict[str, str]]


class HttpTransport:
    def __init__(self, base_url: Callable[[], str], headers: Headers, timeout: float):
        self._base_url = base_url
        self._headers = headers
        self._timeout = timeout

    def call(self, method: str, path: str, body: Any = None, timeout: Optional[float] = None) -> Any:
        return _http.request(method, self._base_url() + path, self._headers(), body, timeout or self._timeout)

    def stream(self, path: str, body: Any) -> Iterator[Tuple[str, str]]:
        return _http.stream("POST", self._base_url() + path, self._headers(), body)

    def chat(self, body: Dict[str, Any]) -> Dict[str, Any]:
        return self.call("POST", "/v1/chat/completions", body)

    def chat_stream(self, body: Dict[str, Any]) -> Iterator[str]:
        for _, data in self.stream("/v1/chat/completions", body):
            yield data

    def invoke_tool(self, name: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return self.call("POST", f"/v1/tools/{_q(name)}:invoke", body)

    def wait_tool(self, call_id: str, timeout_ms: int) -> Dict[str, Any]:
        return self.call("POST", f"/v1/tool_calls/{_q(call_id)}:wait?timeout_ms={timeout_ms}", None, timeout=timeout_ms / 1000 + 15)

    def invoke_agent(self, agent_id: str, body: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
        for event, data in self.stream(f"/v1/agents/{_q(agent_id)}:invoke", body):
            yield event, json.loads(data)

    def list_messages(self, session_id: str, limit: int) -> List[Dict[str, Any]]:
        return self.call("GET", f"/v1/sessions/{_q(session_id)}/messages?limit={limit}")["messages"]

    def append_message(self, session_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return self.call("POST", f"/v1/sessions/{_q(session_id)}/messages", body)["message"]

    def put_context(self, body: Dict[str, Any]) -> Dict[str, Any]:
        return self.call("POST", "/v1/context", body)["blob"]

    def get_context(self, key: str, version: Optional[int]) -> Dict[str, Any]:
        return self.call("GET", f"/v1/context/{_q(key)}" + (f"?version={version}" if version is not None else ""))["blob"]


def _q(segment: str) -> str:
    return urllib.parse.quote(str(segment), safe="")


_channels: Dict[str, Any] = {}
_channels_lock = threading.Lock()


def _channel(target: str) -> Any:
    """One channel per target for the process: clients made per invocation share it.

    It takes answers of any size, as HTTP does: the core bounds what it sends
    (a context blob may be 16 MB), and grpcio's default would refuse over 4 MB.
    """
    with _channels_lock:
        if target not in _channels:
            _channels[target] = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", -1)])
        return _channels[target]


class GrpcTransport:
    """The core's services over grpcio; the same answers as HTTP."""

    def __init__(self, target: str, headers: Headers, timeout: float):
        if grpc is None:
            raise ImportError("the gRPC transport needs grpcio and protobuf (Debian: python3-grpcio python3-protobuf)")
        self._target = target
        self._channel = _channel(target)
        self._headers = headers
        self._timeout = timeout
        self._llm = llm_pb2_grpc.LlmProxyServiceStub(self._channel)
        self._tools = tool_pb2_grpc.ToolServiceStub(self._channel)
        self._agents = agent_pb2_grpc.AgentServiceStub(self._channel)
        self._sessions = session_pb2_grpc.SessionServiceStub(self._channel)
        self._context = context_pb2_grpc.ContextStoreServiceStub(self._channel)

    def close(self) -> None:
        """Closes the channel this process shares for the target; the next client opens another."""
        with _channels_lock:
            if _channels.get(self._target) is self._channel:
                del _channels[self._target]
        self._channel.close()

    def _metadata(self) -> List[Tuple[str, str]]:
        return [(k.lower(), v) for k, v in self._headers().items()]

    def _unary(self, method: Any, request: Any, timeout: Optional[float] = None) -> Any:
        try:
            return method(request, metadata=self._metadata(), timeout=timeout or self._timeout)
        except grpc.RpcError as e:
            raise _platform_error(e) from None

    def _run_id(self) -> str:
        return self._headers().get("x-run-id", "")

    def chat(self, body: Dict[str, Any]) -> Dict[str, Any]:
        res = self._unary(self._llm.CreateChatCompletion, llm_pb2.CreateChatCompletionRequest(body=json.dumps(body).encode(), run_id=self._run_id()))
        answer = json.loads(res.body)
        if res.status >= 400:
            e = answer.get("error") or {}
            raise PlatformError(res.status, str(e.get("code") or e.get("type") or "llm_error"), str(e.get("message", "")))
        return answer

    def chat_stream(self, body: Dict[str, Any]) -> Iterator[str]:
        request = llm_pb2.StreamChatCompletionRequest(body=json.dumps(body).encode(), run_id=self._run_id())
        try:
            for message in self._llm.StreamChatCompletion(request, metadata=self._metadata()):
                if message.done:
                    return
                yield message.data.decode("utf-8")
        except grpc.RpcError as e:
            raise _platform_error(e) from None

    def invoke_tool(self, name: str, body: Dict[str, Any]) -> Dict[str, Any]:
        args = struct_pb2.Struct()
        args.update(body.get("args") or {})
        request = tool_pb2.InvokeToolRequest(tool_name=name, run_id=body.get("run_id") or "", args=args, idempotency_key=body.get("idempotency_key", ""))
        if body.get("timeout_ms"):
            request.timeout_ms = int(body["timeout_ms"])
        res = self._unary(self._tools.InvokeTool, request)
        status = tool_pb2.ToolInvokeStatus.Name(res.status).replace("TOOL_INVOKE_STATUS_", "").lower()
        out: Dict[str, Any] = {"status": status, "tool_call_id": res.tool_call_id}
        if status == "succeeded":
            out["result"] = plain(res.result) if res.HasField("result") else None
        elif status == "failed":
            out["error"] = {"code": res.error.code, "message": res.error.message}
        return out

    def wait_tool(self, call_id: str, timeout_ms: int) -> Dict[str, Any]:
        call = self._unary(self._tools.WaitToolCall, tool_pb2.WaitToolCallRequest(tool_call_id=call_id, timeout_ms=timeout_ms), timeout=timeout_ms / 1000 + 15).tool_call
        status = tool_pb2.ToolCallStatus.Name(call.status).replace("TOOL_CALL_STATUS_", "").lower()
        out: Dict[str, Any] = {"status": status, "tool_call_id": call.tool_call_id}
        if call.HasField("result"):
            out["result"] = plain(call.result)
        if call.HasField("error"):
            out["error"] = {"code": call.error.code, "message": call.error.message}
        return out

    def invoke_agent(self, agent_id: str, body: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any]]]:
        context = struct_pb2.Struct()
        context.update(body.get("context") or {})
        msg = body["input_message"]
        request = agent_pb2.InvokeAgentRequest(agent_id=agent_id, parent_run_id=body.get("parent_run_id") or "",
                                               input_message=types_pb2.ChatMessage(role=msg["role"], content=msg["content"]), context=context)
        try:
            for res in self._agents.InvokeAgent(request, metadata=self._metadata()):
                e = res.event
                p = plain(e.payload) if e.HasField("payload") else {}
                if e.type == "agent_stream_delta":
                    yield "delta", {"text": p.get("text", ""), "run_id": e.run_id}
                elif e.type == "agent_state":
                    yield "state", {"state": p.get("state"), "detail": p.get("detail") or {}}
                elif e.type == "run_done":
                    yield "done", {"usage": p.get("usage") or {}, "final_message": p.get("final_message") or "", "run_id": e.run_id}
                elif e.type == "run_failed":
                    error = p.get("error") or {}
                    yield "error", {"code": error.get("code", "agent_error"), "message": error.get("message", ""), "run_id": e.run_id}
                elif e.type == "run_cancelled":
                    yield "error", {"code": "cancelled", "message": p.get("reason") or "cancelled", "run_id": e.run_id}
        except grpc.RpcError as e:
            raise _platform_error(e) from None

    def list_messages(self, session_id: str, limit: int) -> List[Dict[str, Any]]:
        res = self._unary(self._sessions.ListMessages, session_pb2.ListMessagesRequest(session_id=session_id, limit=limit))
        return [_message(m) for m in res.messages]

    def append_message(self, session_id: str, body: Dict[str, Any]) -> Dict[str, Any]:
        metadata = struct_pb2.Struct()
        metadata.update(body.get("metadata") or {})
        request = session_pb2.AppendMessageRequest(session_id=session_id, role=body["role"], content=body["content"], run_id=body.get("run_id", ""),
                                                   metadata=metadata if body.get("metadata") else None)
        return _message(self._unary(self._sessions.AppendMessage, request).message)

    def put_context(self, body: Dict[str, Any]) -> Dict[str, Any]:
        data = struct_pb2.Value()
        json_format.ParseDict(body["data"], data)
        request = context_pb2.PutContextRequest(context_key=body.get("context_key", ""), owner_type=body["owner_type"], owner_id=body["owner_id"], data=data)
        if body.get("expected_version") is not None:
            request.expected_version = int(body["expected_version"])
        return _blob(self._unary(self._context.PutContext, request).blob)

    def get_context(self, key: str, version: Optional[int]) -> Dict[str, Any]:
        request = context_pb2.GetContextRequest(context_key=key)
        if version is not None:
            request.version = version
        return _blob(self._unary(self._context.GetContext, request).blob)


def plain(value: Any) -> Any:
    """A Struct, ListValue or Value as plain Python, with integers restored.

    `google.protobuf.Struct` keeps every number as a double, so `{"n": 2}`
    arrives as 2.0. JSON, ABC's other surface, has one number type, and ABC
    writes whole numbers without a fraction; so the SDK reads an integral
    double within ±2^53 as an int, and `{"n": 2}` comes back as 2.
    """
    if isinstance(value, struct_pb2.Struct):
        return {k: plain(v) for k, v in value.fields.items()}
    if isinstance(value, struct_pb2.ListValue):
        return [plain(v) for v in value.values]
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        n = value.number_value
        return int(n) if n.is_integer() and abs(n) <= 2 ** 53 else n
    if kind == "struct_value" or kind == "list_value":
        return plain(getattr(value, kind))
    return None if kind in (None, "null_value") else getattr(value, kind)


def _message(m: Any) -> Dict[str, Any]:
    return {"message_id": m.message_id, "session_id": m.session_id, "run_id": m.run_id or None, "role": m.role, "content": m.content,
            "created_at": m.created_at, "metadata": plain(m.metadata) if m.HasField("metadata") else None}


def _blob(b: Any) -> Dict[str, Any]:
    return {"context_key": b.context_key, "owner_type": b.owner_type, "owner_id": b.owner_id, "version": b.version,
            "data": plain(b.data) if b.HasField("data") else None}


def _platform_error(e: Any) -> PlatformError:
    """ABC's error from a failed call: the abc-error-bin trailer, else the status."""
    for key, value in e.trailing_metadata() or ():
        if key == "abc-error-bin":
            err = error_pb2.Error.FromString(value)
            return PlatformError(0, err.code, err.message, category=error_pb2.ErrorCategory.Name(err.category).replace("ERROR_CATEGORY_", ""),
                                 retryable=err.retryable, details=plain(err.details) if err.HasField("details") else None, trace_id=err.trace_id)
    return PlatformError(0, str(e.code().name).lower(), e.details() or "")
