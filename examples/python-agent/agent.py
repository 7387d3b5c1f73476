"""Seed 001 Appendix A as an agent: each invocation runs appendix_a.py, the
appendix's code exactly as the seed writes it. Inside the handler its
PlatformClient works for the run ABC invoked (its token, run id and platform
URL come from the request), and its prints stream to the user as deltas.

    PORT=9001 python3 examples/python-agent/agent.py
"""
import os
import runpy
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

from platform_sdk import InvokeContext, serve  # noqa: E402

APPENDIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "appendix_a.py")


def handle(ctx: InvokeContext) -> str:
    ctx.state("thinking", {"step": "appendix_a"})
    scope = runpy.run_path(APPENDIX)
    child = scope["child_response"]
    print(f"\n{child.final_message}")
    # What the agent learnt goes to the session's transcript and its context store.
    ctx.client.transcript.append("system", f"weather_agent said: {child.final_message}")
    ctx.client.context.put({"weather": scope["result"]}, context_key=f"weather:{ctx.session_id}")
    return ctx.streamed


if __name__ == "__main__":
    serve(handle)
