"""A child agent for Appendix A's example: answers a weather question word by word.

    PORT=9002 python3 examples/python-agent/weather_agent.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

from platform_sdk import InvokeContext, serve  # noqa: E402


def handle(ctx: InvokeContext) -> None:
    for word in ["北京", "今天", "晴，", "25°C"]:
        ctx.delta(word)


if __name__ == "__main__":
    serve(handle)
