"""JSON as objects with attributes, as the OpenAI SDK answers: `chunk.choices[0].delta.content`."""
from __future__ import annotations

from typing import Any


class JsonObject(dict):
    """A dict whose keys are also attributes; a missing attribute is None (as an absent optional field)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)


def wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return JsonObject({k: wrap(v) for k, v in value.items()})
    if isinstance(value, list):
        return [wrap(v) for v in value]
    return value
