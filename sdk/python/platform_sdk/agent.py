"""The agent protocol's server side (seed 001 §6): POST /invoke answered with
server-sent events `delta`, `state`, `done` or `error`, and GET /health.

A handler gets an `InvokeContext` and returns the final message (or None:
the text it streamed). While it runs, `print` streams to the user as deltas,
and every `PlatformClient` works for this run (its token, run id, platform
URL and trace), so seed 001 Appendix A's code runs as written.
"""
from __future__ import annotations

import io
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from ._context import Invocation, bind, unbind
from .client import PlatformClient
from .errors import PlatformError, ToolError
from .types import ChatMessage, ResumeInfo

HandlerResult = Union[str, Dict[str, Any], None]


class InvokeContext:
    """One invocation: its input, a client bound to its run, and the stream back to the user."""

    def __init__(self, body: Dict[str, Any], invocation: Invocation, emit: Callable[[str, Dict[str, Any]], None]):
        self.run_id: str = invocation.run_id
        self.session_id: str = invocation.session_id
        self.agent_id: str = invocation.agent_id
        self.input_message: ChatMessage = body.get("input_message") or {"role": "user", "content": ""}
        self.messages: List[ChatMessage] = body.get("messages") or []
        self.context: Dict[str, Any] = body.get("context") or {}
        self.resume: Optional[ResumeInfo] = invocation.resume
        self.traceparent = invocation.traceparent
        self.client = PlatformClient(base_url=invocation.base_url, run_id=invocation.run_id)
        self._emit = emit
        self._streamed: List[str] = []
        # What a resumed handler streams again of the text its user already has is not sent twice.
        self._delivered = invocation.resume.streamed_text if invocation.resume else ""

    def delta(self, text: str) -> None:
        """Streams a piece of the answer to the user."""
        if self._delivered:
            repeated = text if self._delivered.startswith(text) else self._delivered if text.startswith(self._delivered) else ""
            self._delivered = self._delivered[len(repeated):] if repeated else ""
            self._streamed.append(repeated)
            text = text[len(repeated):]
        if text:
            self._streamed.append(text)
            self._emit("delta", {"text": text, "run_id": self.run_id})

    def state(self, state: str, detail: Optional[Dict[str, Any]] = None) -> None:
        """Reports progress, e.g. `state("thinking", {"step": "planning"})`."""
        self._emit("state", {"state": state, "detail": detail or {}})

    @property
    def streamed(self) -> str:
        """The whole answer so far, what was delivered before a resume included."""
        return "".join(self._streamed)


Handler = Callable[[InvokeContext], HandlerResult]


class AgentServer:
    """An HTTP server speaking the agent protocol for one handler, on its own threads."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0, *, version: str = "1.0.0",
                 capabilities: Sequence[str] = ("streaming",)):
        _route_stdout()
        health = json.dumps({"status": "healthy", "version": version, "capabilities": list(capabilities)}).encode()

        class Endpoint(_Endpoint):
            pass

        Endpoint.handler = staticmethod(handler)
        Endpoint.health = health
        self._server = ThreadingHTTPServer((host, port), Endpoint)
        self._server.daemon_threads = True
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "AgentServer":
        """Serves on a background thread; returns at once."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="abc-agent", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve(handler: Handler, host: str = "0.0.0.0", port: Optional[int] = None, **options: Any) -> None:
    """Serves `handler` until interrupted, on PORT (default 9001)."""
    server = AgentServer(handler, host, port if port is not None else int(os.environ.get("PORT", "9001")), **options)
    print(f"agent listening on {server.url}", file=sys.__stdout__, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()


class _Endpoint(BaseHTTPRequestHandler):
    handler: Handler
    health: bytes
    protocol_version = "HTTP/1.0"  # the stream ends when the connection closes

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:
        if self.path != "/health":
            return self._plain(404, b"")
        self._plain(200, self.health, "application/json")

    def do_POST(self) -> None:
        if self.path != "/invoke":
            return self._plain(404, b"")
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        except ValueError:
            return self._plain(400, b'{"error":"the body must be JSON"}', "application/json")
        resume = (body.get("context") or {}).get("resume")
        invocation = Invocation(
            run_id=self.headers.get("x-run-id") or body.get("run_id", ""),
            session_id=self.headers.get("x-session-id") or body.get("session_id", ""),
            agent_id=body.get("agent_id", ""),
            base_url=(self.headers.get("x-platform-base-url") or "").rstrip("/"),
            token=self.headers.get("x-abc-run-token") or "",
            traceparent=self.headers.get("traceparent"),
            resume=ResumeInfo.from_json(resume) if isinstance(resume, dict) else None,
        )
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        ctx = InvokeContext(body, invocation, self._event)
        token = bind(invocation)
        _emitters.value = ctx
        try:
            result = self.handler(ctx)
            final = result.get("final_message") if isinstance(result, dict) else result
            usage = result.get("usage", {}) if isinstance(result, dict) else {}
            self._event("done", {"usage": usage, "final_message": final if final is not None else ctx.streamed})
        except _Gone:
            pass
        except (ToolError, PlatformError) as e:
            self._quietly("error", {"code": e.code, "message": e.message})
        except Exception as e:  # the handler's own failure is the run's, not the server's
            self._quietly("error", {"code": "agent_failed", "message": f"{type(e).__name__}: {e}"})
        finally:
            _emitters.value = None
            unbind(token)

    def _event(self, event: str, data: Dict[str, Any]) -> None:
        try:
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode("utf-8"))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            raise _Gone() from None

    def _quietly(self, event: str, data: Dict[str, Any]) -> None:
        try:
            self._event(event, data)
        except _Gone:
            pass

    def _plain(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Gone(Exception):
    """ABC closed the stream: the run was cancelled."""


# `print` inside a handler streams to its user: stdout writes go to the thread's invocation.
_emitters = threading.local()


class _StdoutRouter(io.TextIOBase):
    def __init__(self, underlying: Any):
        self._underlying = underlying

    def write(self, text: str) -> int:
        ctx = getattr(_emitters, "value", None)
        if ctx is None:
            return self._underlying.write(text)
        if text:
            ctx.delta(text)
        return len(text)

    def flush(self) -> None:
        if getattr(_emitters, "value", None) is None:
            self._underlying.flush()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._underlying, "encoding", "utf-8")

    def isatty(self) -> bool:
        return False


def _route_stdout() -> None:
    if not isinstance(sys.stdout, _StdoutRouter):
        sys.stdout = _StdoutRouter(sys.stdout)
