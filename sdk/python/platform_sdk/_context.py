"""The invocation being handled, per thread of the agent server."""
from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Optional

from .types import ResumeInfo


@dataclass(frozen=True)
class Invocation:
    """What ABC sent with POST /invoke: the run, its token, the platform's URL, the trace."""

    run_id: str
    session_id: str
    agent_id: str
    base_url: str
    token: str
    traceparent: Optional[str]
    resume: Optional[ResumeInfo]


_current: contextvars.ContextVar[Optional[Invocation]] = contextvars.ContextVar("abc_invocation", default=None)


def current() -> Optional[Invocation]:
    """The invocation this code runs for, if any."""
    return _current.get()


def bind(invocation: Optional[Invocation]) -> contextvars.Token:
    return _current.set(invocation)


def unbind(token: contextvars.Token) -> None:
    _current.reset(token)
