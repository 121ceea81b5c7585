"""``Message``: what a producer hands to the store, and how the broker turns it into properties.

The property map is built the way a RocketMQ client and broker build it (client: KEYS, TAGS,
WAIT, user properties, UNIQ_KEY; broker: CLUSTER added, 4.9.8 drops WAIT) and then ordered as
the broker's ``java.util.HashMap`` iterates it, so the bytes on disk match a real broker's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import ip_address
from typing import TYPE_CHECKING

from rmqlab.codec import flags
from rmqlab.codec.batch import client_properties
from rmqlab.codec.properties import encode_broker_properties_and_map

if TYPE_CHECKING:
    from rmqlab.store.results import PutMessageResult

__all__ = [
    "BAD_FIELD_ERRORS", "Message", "build_properties", "build_properties_and_map", "message_field_error",
    "refuse_bad_fields",
]


@dataclass(slots=True)
class Message:
    """A message to put. ``keys`` may be a sequence or one space-separated string.

    ``born_host`` is ``(ip, port)`` or ``"ip:port"``; ``born_timestamp`` None means "now" (the
    store's clock). ``delay_time_level`` > 0 sets the ``DELAY`` property (scheduled message).
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: Sequence[str] | str = ()
    properties: Mapping[str, str] | None = None
    queue_id: int = 0
    flag: int = 0
    born_host: tuple[str, int] | str = ("127.0.0.1", 0)
    born_timestamp: int | None = None
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    delay_time_level: int = 0
    wait_store_msg_ok: bool = True
    uniq_key: str | None = None
    _extra: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def keys_string(self) -> str | None:
        if isinstance(self.keys, str):
            return self.keys or None
        joined = flags.KEY_SEPARATOR.join(k for k in self.keys if k)
        return joined or None

    @property
    def born_host_tuple(self) -> tuple[str, int]:
        return parse_host(self.born_host)


def parse_host(host: tuple[str, int] | str) -> tuple[str, int]:
    """``"ip:port"`` / ``"[v6]:port"`` / ``(ip, port)`` -> ``(ip, port)``."""
    if isinstance(host, tuple):
        return host[0], int(host[1])
    ip, _, port = host.rpartition(":")
    if ip.startswith("[") and ip.endswith("]"):
        ip = ip[1:-1]
    return ip, int(port)


_JAVA_INT = (-(2**31), 2**31 - 1)
_JAVA_LONG = (-(2**63), 2**63 - 1)


def message_field_error(msg: Message) -> str | None:
    """Why ``msg`` cannot become a record, naming the field, or None when its fields are fine.

    The put paths encode without looking first (that is their speed); when an encoder raises,
    this says which field of the user's message was wrong, so the put answers MESSAGE_ILLEGAL
    with a reason instead of a ``struct.error``. Ranges are the Java types the record stores.
    """
    if not isinstance(msg.topic, str):
        return f"topic must be a str, not {type(msg.topic).__name__}"
    if not isinstance(msg.body, bytes | bytearray | memoryview):
        hint = " (encode text first, e.g. body=text.encode())" if isinstance(msg.body, str) else ""
        return f"body must be bytes-like, not {type(msg.body).__name__}{hint}"
    checks = (("queue_id", _JAVA_INT), ("flag", _JAVA_INT), ("sys_flag", _JAVA_INT), ("reconsume_times", _JAVA_INT),
              ("delay_time_level", _JAVA_INT), ("born_timestamp", _JAVA_LONG),
              ("prepared_transaction_offset", _JAVA_LONG))  # fmt: skip
    for name, (lo, hi) in checks:
        v = getattr(msg, name)
        if v is None and name == "born_timestamp":
            continue
        if not isinstance(v, int):
            return f"{name} must be an int, not {type(v).__name__}"
        if not lo <= v <= hi:
            return f"{name} {v} is outside the Java {'int' if hi == _JAVA_INT[1] else 'long'} range [{lo}, {hi}]"
    for name in ("tags", "uniq_key"):
        v = getattr(msg, name)
        if v is not None and not isinstance(v, str):
            return f"{name} must be a str or None, not {type(v).__name__}"
    if not isinstance(msg.keys, str) and any(not isinstance(k, str) for k in msg.keys):
        return "keys must be a str or a sequence of str"
    try:
        ip, port = parse_host(msg.born_host)
        ip_address(ip)
    except (TypeError, ValueError, IndexError):
        return f"born_host {msg.born_host!r} is not 'ip:port' or (ip, port) with an IPv4 or IPv6 address"
    if not 0 <= port <= 65535:
        return f"born_host port {port} is outside 0-65535"
    return None


#: what an encoder raises for a message field it cannot pack; put paths catch these and answer
#: with :func:`refuse_bad_fields`
BAD_FIELD_ERRORS = (struct.error, OverflowError, TypeError, ValueError)


def refuse_bad_fields(msgs: Iterable[Message]) -> PutMessageResult:
    """MESSAGE_ILLEGAL naming the first message field an encoder choked on. Call it only while
    handling the encoder's error: when every field is fine it re-raises that error (then the
    fault is rmqlab's, not the caller's, and hiding it would be a silent wrong answer)."""
    from rmqlab.store.results import PutMessageResult, PutMessageStatus

    for i, msg in enumerate(msgs):
        why = message_field_error(msg) if isinstance(msg, Message) else f"not a Message: {type(msg).__name__}"
        if why is not None:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason=why if i == 0 else f"message {i}: {why}")
    raise  # the error being handled


def build_properties(msg: Message, uniq_key: str, *, cluster: str, rocketmq_version: str) -> bytes:
    """The properties bytes a real producer + broker of ``rocketmq_version`` would store."""
    return build_properties_and_map(msg, uniq_key, cluster=cluster, rocketmq_version=rocketmq_version)[0]


def build_properties_and_map(
    msg: Message, uniq_key: str, *, cluster: str, rocketmq_version: str
) -> tuple[bytes, dict[str, str] | None]:
    """:func:`build_properties` plus the map a reader parses back from the bytes, or None when
    only parsing can tell (see ``codec.properties.encode_broker_properties_and_map``)."""
    props = client_properties(msg, uniq_key)
    return encode_broker_properties_and_map(props, rocketmq_version, cluster)
