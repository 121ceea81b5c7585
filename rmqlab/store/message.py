"""``Message``: what a producer hands to the store, and how the broker turns it into properties.

The property map is built the way a RocketMQ client and broker build it (client: KEYS, TAGS,
WAIT, user properties, UNIQ_KEY; broker: CLUSTER added, 4.9.8 drops WAIT) and then ordered as
the broker's ``java.util.HashMap`` iterates it, so the bytes on disk match a real broker's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rmqlab.codec import flags
from rmqlab.codec.batch import client_properties
from rmqlab.codec.properties import encode_broker_properties_and_map

__all__ = ["Message", "build_properties", "build_properties_and_map"]


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
