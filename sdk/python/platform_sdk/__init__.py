"""ABC's Python SDK for agents (seed 001 Appendix A).

    from platform_sdk import PlatformClient, serve

    def handle(ctx):
        client = PlatformClient()
        for chunk in client.chat.completions.create(model="gpt-4", messages=[ctx.input_message], stream=True):
            print(chunk.choices[0].delta.content or "", end="")

    serve(handle)
"""
from .agent import AgentServer, InvokeContext, serve
from .client import PlatformClient
from .errors import PlatformError, ToolError
from .types import AgentResponse, ChatMessage, ContextBlob, ResumeInfo, Tool, ToolCallRecord, TranscriptMessage

__all__ = [
    "AgentResponse", "AgentServer", "ChatMessage", "ContextBlob", "InvokeContext", "PlatformClient", "PlatformError",
    "ResumeInfo", "Tool", "ToolCallRecord", "ToolError", "TranscriptMessage", "serve",
]
__version__ = "0.1.0"
