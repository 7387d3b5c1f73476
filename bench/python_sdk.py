"""Per-call cost of the Python SDK against the raw calls it wraps, on one ABC:
GET /v1/context/KEY with urllib against PlatformClient.context.get over HTTP,
and ContextStoreService.GetContext with a grpcio stub against the SDK over
gRPC. Prints one JSON object of p50 and p99 microseconds per variant."""
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk", "python"))

import grpc  # noqa: E402

from platform_sdk import PlatformClient  # noqa: E402
from platform_sdk._proto.abc.orchestrator.v1 import context_pb2, context_pb2_grpc  # noqa: E402

http_url, grpc_target, key, context_key = sys.argv[1:5]
rounds, per_round = int(os.environ.get("BENCH_ROUNDS", "5")), int(os.environ.get("BENCH_CALLS", "400"))
auth = {"authorization": f"Bearer {key}"}
channel = grpc.insecure_channel(grpc_target)
stub = context_pb2_grpc.ContextStoreServiceStub(channel)
sdk_http = PlatformClient(base_url=http_url, api_key=key)
sdk_grpc = PlatformClient(grpc_target=grpc_target, api_key=key)


def raw_http():
    with urllib.request.urlopen(urllib.request.Request(f"{http_url}/v1/context/{context_key}", headers=auth)) as res:
        json.loads(res.read())


def raw_grpc():
    stub.GetContext(context_pb2.GetContextRequest(context_key=context_key), metadata=[("authorization", f"Bearer {key}")])


variants = {
    "raw_http": raw_http,
    "sdk_http": lambda: sdk_http.context.get(context_key),
    "raw_grpc": raw_grpc,
    "sdk_grpc": lambda: sdk_grpc.context.get(context_key),
}
samples = {name: [] for name in variants}
for call in variants.values():  # warm-up
    for _ in range(50):
        call()
for round_ in range(rounds):  # interleaved rounds, the order alternating
    for name in (list(variants) if round_ % 2 == 0 else list(reversed(variants))):
        call = variants[name]
        for _ in range(per_round):
            start = time.perf_counter()
            call()
            samples[name].append((time.perf_counter() - start) * 1e6)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q / 100))]


print(json.dumps({name: {"p50": pct(xs, 50), "p99": pct(xs, 99), "n": len(xs)} for name, xs in samples.items()}))
