"""Type checks of the store API's arguments, made only when a value is not already the plain type.

A ``str`` queue id or topic ``None`` used to get an answer for a queue that does not exist (an
empty queue, offset 0): a silent wrong answer. Numpy integers, which offsets read out of a
DataFrame are, are accepted as the ints they are.
"""

from __future__ import annotations

import operator

from rmqlab.errors import InvalidArgument

__all__ = ["int_arg", "queue_args", "str_arg"]


def int_arg(name: str, value: object) -> int:
    """``value`` as an ``int`` (anything with ``__index__`` but a bool), else InvalidArgument."""
    if value.__class__ is int:
        return value  # type: ignore[return-value]
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise InvalidArgument(f"{name} must be an int, not {type(value).__name__} {value!r}")


def str_arg(name: str, value: object) -> str:
    """``value`` if it is a ``str``, else InvalidArgument."""
    if isinstance(value, str):
        return value
    raise InvalidArgument(f"{name} must be a str, not {type(value).__name__} {value!r}")


def queue_args(topic: object, queue_id: object) -> tuple[str, int]:
    """``(topic, queue_id)`` checked: a str and an int."""
    return str_arg("topic", topic), int_arg("queue_id", queue_id)
