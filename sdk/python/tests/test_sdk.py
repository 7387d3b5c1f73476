"""The SDK against real sockets: a small ABC stand-in that speaks ABC's HTTP
shapes, and the agent server called the way ABC calls it."""
import contextlib
import json
import os
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from platform_sdk import AgentServer, PlatformClient, PlatformError, ToolError  # noqa: E402
from platform_sdk._http import events  # noqa: E402
from platform_sdk._objects import wrap  # noqa: E402


class FakeAbc:
    """Answers the routes the client uses, and records every request."""

    def __init__(self):
        self.requests = []
        self.waits = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def _reply(self, status, body, content_type="application/json"):
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self):
                fake.requests.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None))
                if self.path.startswith("/v1/sessions/"):
                    return self._reply(200, {"messages": [{"message_id": "m1", "session_id": "s1", "run_id": None, "role": "user", "content": "hi", "created_at": 1}], "has_more": False})
                if self.path.startswith("/v1/context/"):
                    return self._reply(200, {"blob": {"context_key": "k", "owner_type": "session", "owner_id": "s1", "version": 2, "data": {"n": 2}}})
                self._reply(404, {"error": {"code": "not_found", "category": "VALIDATION", "message": "no such route", "retryable": False, "trace_id": "t" * 32}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"null")
                fake.requests.append(("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path == "/v1/chat/completions" and body.get("stream"):
                    chunks = [{"choices": [{"delta": {"role": "assistant"}}]}, {"choices": [{"delta": {"content": "Hel"}}]}, {"choices": [{"delta": {"content": "lo"}}]}]
                    return self._reply(200, "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n", "text/event-stream")
                if self.path == "/v1/chat/completions":
                    return self._reply(200, {"id": "c1", "choices": [{"message": {"role": "assistant", "content": "Hello"}}], "usage": {"total_tokens": 3}})
                if self.path == "/v1/tools/weather.query:invoke":
                    return self._reply(200, {"status": "pending", "tool_call_id": "tc_1", "reason": "waiting_approval"})
                if self.path == "/v1/tools/bank.transfer:invoke":
                    return self._reply(200, {"status": "failed", "tool_call_id": "tc_2", "error": {"code": "rejected", "message": "a human said no"}})
                if self.path.startswith("/v1/tool_calls/tc_1:wait"):
                    fake.waits += 1
                    if fake.waits < 2:
                        return self._reply(200, {"tool_call_id": "tc_1", "status": "waiting_approval"})
                    return self._reply(200, {"tool_call_id": "tc_1", "status": "succeeded", "result": {"weather": "晴", "temperature": 25}})
                if self.path == "/v1/agents/weather_agent:invoke":
                    sse = b"event: state\ndata: {\"state\":\"started\"}\n\nevent: delta\ndata: {\"text\":\"sunny\"}\n\nevent: done\ndata: {\"final_message\":\"sunny\",\"run_id\":\"run_c\",\"usage\":{}}\n\n"
                    return self._reply(200, sse, "text/event-stream")
                if self.path == "/v1/context":
                    return self._reply(200, {"blob": {"context_key": "k", "owner_type": body["owner_type"], "owner_id": body["owner_id"], "version": 1, "data": body["data"]}})
                if self.path.startswith("/v1/sessions/"):
                    return self._reply(201, {"message": {"message_id": "m2", "session_id": "s1", "run_id": body.get("run_id"), "role": body["role"], "content": body["content"], "created_at": 2}})
                self._reply(404, {"error": {"code": "not_found", "category": "VALIDATION", "message": "no such route", "retryable": False, "trace_id": "t" * 32}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def abc():
    fake = FakeAbc()
    yield fake
    fake.close()


def test_events_parses_server_sent_events():
    lines = [b"event: delta\n", b'data: {"a":\n', b"data: 1}\n", b"\n", b": ping\n", b"data: [DONE]\n", b"\n"]
    assert list(events(lines)) == [("delta", '{"a":\n1}'), ("message", "[DONE]")]


def test_json_reads_as_attributes():
    chunk = wrap({"choices": [{"delta": {"content": "hi"}}]})
    assert chunk.choices[0].delta.content == "hi"
    assert chunk.choices[0].delta.role is None


def test_standalone_client_uses_its_api_key(abc):
    client = PlatformClient(base_url=abc.url, run_id="run_1", api_key="abc_key")
    answer = client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "Hello"
    method, path, headers, body = abc.requests[-1]
    assert headers["authorization"] == "Bearer abc_key"
    assert headers["x-run-id"] == "run_1"
    assert body == {"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}


def test_streaming_chat_yields_chunks(abc):
    client = PlatformClient(base_url=abc.url, api_key="k")
    text = [c.choices[0].delta.content for c in client.chat.completions.create(model="gpt-4", messages=[], stream=True)]
    assert text == [None, "Hel", "lo"]
    assert abc.requests[-1][3]["stream"] is True


def test_tool_invoke_waits_through_the_approval(abc):
    client = PlatformClient(base_url=abc.url, run_id="run_1", api_key="k")
    assert client.tools.invoke(tool_name="weather.query", args={"city": "北京"}) == {"weather": "晴", "temperature": 25}
    assert abc.requests[0][3] == {"run_id": "run_1", "args": {"city": "北京"}}
    assert abc.waits == 2


def test_tool_invoke_raises_when_the_call_fails(abc):
    client = PlatformClient(base_url=abc.url, run_id="run_1", api_key="k")
    with pytest.raises(ToolError) as raised:
        client.tools.invoke("bank.transfer", {"amount": 1})
    assert (raised.value.code, raised.value.tool_call_id) == ("rejected", "tc_2")


def test_errors_carry_abcs_error_shape(abc):
    client = PlatformClient(base_url=abc.url, api_key="k")
    with pytest.raises(PlatformError) as raised:
        client.tools.invoke("unknown.tool")
    assert (raised.value.status, raised.value.code, raised.value.category, raised.value.trace_id) == (404, "not_found", "VALIDATION", "t" * 32)


def test_child_agents_transcripts_and_context(abc):
    client = PlatformClient(base_url=abc.url, run_id="run_1", session_id="s1", api_key="k")
    child = client.agents.invoke(agent_id="weather_agent", message={"role": "user", "content": "weather?"})
    assert (child.final_message, child.text, child.run_id) == ("sunny", "sunny", "run_c")
    assert abc.requests[-1][3] == {"parent_run_id": "run_1", "input_message": {"role": "user", "content": "weather?"}}
    assert [m.content for m in client.transcript.list()] == ["hi"]
    assert client.transcript.append("system", "noted").run_id == "run_1"
    assert client.context.put({"n": 2}).owner_id == "s1"
    assert client.context.get("k").data == {"n": 2}


def invoke(url, context=None, headers=None):
    """Calls an agent as ABC does; returns its (event, data) list."""
    body = {"agent_id": "a", "session_id": "s1", "run_id": "run_9", "input_message": {"role": "user", "content": "count"}, "messages": [], "context": context or {}}
    req = urllib.request.Request(f"{url}/invoke", data=json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json", "x-run-id": "run_9", "x-session-id": "s1", "x-platform-base-url": "http://abc.invalid", "x-abc-run-token": "abcrun_t", **(headers or {}),
    })
    with urllib.request.urlopen(req, timeout=10) as res:
        return [(e, json.loads(d)) for e, d in events(res)]


def test_agent_server_streams_prints_and_deltas_and_says_done():
    def handle(ctx):
        ctx.state("thinking")
        print("one", end=" ")
        ctx.delta("two")
    server = AgentServer(handle).start()
    try:
        got = invoke(server.url)
        with urllib.request.urlopen(f"{server.url}/health") as res:
            assert json.loads(res.read())["status"] == "healthy"
    finally:
        server.stop()
    assert got == [("state", {"state": "thinking", "detail": {}}), ("delta", {"text": "one", "run_id": "run_9"}), ("delta", {"text": " ", "run_id": "run_9"}),
                   ("delta", {"text": "two", "run_id": "run_9"}), ("done", {"usage": {}, "final_message": "one two"})]


def test_a_client_inside_a_handler_speaks_for_the_invoked_run(abc):
    seen = {}

    def handle(ctx):
        client = PlatformClient(base_url="http://orchestrator:8080", run_id="run_001")
        seen["run"], seen["url"] = client.run_id, client.base_url
        return "ok"
    server = AgentServer(handle).start()
    try:
        invoke(server.url, headers={"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"})
    finally:
        server.stop()
    assert seen == {"run": "run_9", "url": "http://abc.invalid"}


def test_a_resumed_handler_does_not_send_what_its_user_has():
    def handle(ctx):
        for word in ["one ", "two ", "three"]:
            ctx.delta(word)
    server = AgentServer(handle).start()
    try:
        resumed = invoke(server.url, {"resume": {"reason": "executor_lost", "streamed_text": "one tw", "streamed_chars": 6, "last_cursor": "7", "tool_calls": []}})
    finally:
        server.stop()
    assert [d["text"] for e, d in resumed if e == "delta"] == ["o ", "three"]
    assert resumed[-1] == ("done", {"usage": {}, "final_message": "one two three"})


def test_a_failing_handler_ends_the_stream_with_error():
    def handle(ctx):
        raise ToolError("blocked", "policy said no")
    server = AgentServer(handle).start()
    try:
        assert invoke(server.url) == [("error", {"code": "blocked", "message": "policy said no"})]
    finally:
        server.stop()


def test_struct_numbers_come_back_as_the_user_wrote_them():
    from google.protobuf import struct_pb2

    from platform_sdk._transports import plain

    value = struct_pb2.Struct()
    value.update({"n": 2, "ratio": 2.5, "list": [1, 2.0, {"k": 3}], "big": 2.0 ** 60})
    assert plain(value) == {"n": 2, "ratio": 2.5, "list": [1, 2, {"k": 3}], "big": 2.0 ** 60}
    assert type(plain(value)["n"]) is int


@contextlib.contextmanager
def grpc_server(add_servicer, servicer):
    """A real grpcio server with one of ABC's services; yields its target."""
    from concurrent import futures

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=[("grpc.max_send_message_length", -1)])
    add_servicer(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


def test_grpc_transport_calls_a_tool_and_reads_abcs_error_trailer():
    """A real grpcio server with ABC's ToolService stubs: a result {"n": 2} comes back as 2; a refusal as ABC's error."""
    import grpc
    from google.protobuf import struct_pb2

    from platform_sdk._proto.abc.common.v1 import error_pb2
    from platform_sdk._proto.abc.orchestrator.v1 import tool_pb2, tool_pb2_grpc

    seen = {}

    class Tools(tool_pb2_grpc.ToolServiceServicer):
        def InvokeTool(self, request, context):
            seen["metadata"] = dict(context.invocation_metadata())
            if request.tool_name == "refused":
                err = error_pb2.Error(code="blocked", category=error_pb2.ERROR_CATEGORY_COMPLIANCE, message="policy says no", trace_id="f" * 32)
                context.set_trailing_metadata((("abc-error-bin", err.SerializeToString()),))
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "policy says no")
            result = struct_pb2.Value()
            result.struct_value.update({"n": 2, "echo": dict(request.args)})
            return tool_pb2.InvokeToolResponse(status=tool_pb2.TOOL_INVOKE_STATUS_SUCCEEDED, tool_call_id="tc_9", result=result)

    with grpc_server(tool_pb2_grpc.add_ToolServiceServicer_to_server, Tools()) as target:
        client = PlatformClient(grpc_target=target, run_id="run_1", api_key="abc_key")
        result = client.tools.invoke("count", {"n": 2})
        assert result == {"n": 2, "echo": {"n": 2}}
        assert type(result["n"]) is int
        assert seen["metadata"]["authorization"] == "Bearer abc_key"
        with pytest.raises(PlatformError) as raised:
            client.tools.invoke("refused", {})
        assert (raised.value.code, raised.value.category, raised.value.trace_id) == ("blocked", "COMPLIANCE", "f" * 32)
        client.close()


def test_grpc_transport_reads_an_answer_over_grpcs_default_limit():
    """A context blob of 6 MB (the core accepts up to 16 MB) comes back whole over gRPC, as over HTTP."""
    from google.protobuf import struct_pb2

    from platform_sdk._proto.abc.orchestrator.v1 import context_pb2, context_pb2_grpc

    text = "x" * (6 * 1024 * 1024)

    class Context(context_pb2_grpc.ContextStoreServiceServicer):
        def GetContext(self, request, context):
            data = struct_pb2.Value()
            data.struct_value.update({"text": text})
            return context_pb2.GetContextResponse(blob=context_pb2.ContextBlob(context_key=request.context_key, owner_type="run", owner_id="run_1", version=1, data=data))

    with grpc_server(context_pb2_grpc.add_ContextStoreServiceServicer_to_server, Context()) as target:
        client = PlatformClient(grpc_target=target, run_id="run_1", api_key="abc_key")
        assert client.context.get("big").data == {"text": text}
        client.close()
