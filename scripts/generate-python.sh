#!/usr/bin/env bash
# The Python SDK's gRPC stubs, generated from proto/ with Debian's protoc and
# grpc_python_plugin, vendored under platform_sdk/_proto with their imports
# rewritten: the proto package `abc` would shadow Python's `abc`, and
# `grpc.health` grpcio's own.
set -euo pipefail
cd "$(dirname "$0")/.."
out=sdk/python/platform_sdk/_proto
if ! command -v protoc > /dev/null || ! command -v grpc_python_plugin > /dev/null; then
  echo "protoc or grpc_python_plugin not found (Debian: protobuf-compiler protobuf-compiler-grpc); $out not regenerated" >&2
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
protoc -I proto --python_out="$tmp" --grpc_python_out="$tmp" --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
  $(find proto -name '*.proto' | LC_ALL=C sort)
# A file without a service gets an empty _grpc module: none is kept.
grep -rL --include='*_pb2_grpc.py' 'Stub' "$tmp" | xargs -r rm
find "$tmp" -name '*.py' -exec sed -i -E 's/^from (abc|grpc\.health|google\.rpc)([. ])/from platform_sdk._proto.\1\2/' {} +
find "$tmp" -type d -exec sh -c 'touch "$1/__init__.py"' _ {} \;
rm -rf "$out"
cp -r "$tmp" "$out"
