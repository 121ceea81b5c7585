"""Message filters for ``get_message``: RocketMQ's tag filter by tags code.

``TagFilter("TagA || TagB")`` matches a ConsumeQueue unit when its tags code is the Java hash of
one of the tags, or always for ``*``/empty. Like RocketMQ's ``DefaultMessageFilter`` it does not
look at the CommitLog: hash collisions pass, and consumers re-check the tag string.
"""

from __future__ import annotations

from typing import Protocol

from rmqlab.codec.java_hash import java_hash

__all__ = ["MessageFilter", "TagFilter"]


class MessageFilter(Protocol):
    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool: ...

    def is_matched_by_commit_log(self, buffer: memoryview) -> bool: ...


class TagFilter:
    def __init__(self, expression: str | None = "*") -> None:
        expr = (expression or "*").strip()
        self.expression = expr
        self.match_all = expr in ("", "*")
        self.tags = [t.strip() for t in expr.split("||") if t.strip()]
        self.code_set = frozenset(java_hash(t) for t in self.tags)

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        if self.match_all or tags_code is None:
            return True
        return tags_code in self.code_set

    def is_matched_by_commit_log(self, buffer: memoryview) -> bool:
        return True

    def __repr__(self) -> str:
        return f"TagFilter({self.expression!r})"
