"""The message properties string: map <-> bytes with 0x01/0x02 separators (spec 2.6).

Reading follows Java ``MessageDecoder.string2messageProperties`` exactly (malformed pairs are
skipped, not rejected). Writing byte-compatibly also needs the *order* the broker would serialise
in, which is ``java.util.HashMap`` iteration order: :func:`java_hashmap_order` emulates it.

Version quirk seen in the 4.9.8 reference stores: 4.9.8's broker writes the pairs **without** a
trailing ``0x02`` after the last value, while 5.x ends every pair, the last included, with
``0x02`` (spec golden #6). :func:`encode_properties` takes ``trailing_separator`` for that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from itertools import repeat

from rmqlab.codec.flags import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.prop_crc import crc32_property

__all__ = [
    "broker_properties",
    "crc32_property",
    "decode_properties",
    "encode_broker_properties",
    "encode_broker_properties_and_map",
    "encode_properties",
    "encode_scheduled_broker_properties_and_map",
    "encode_timer_broker_properties_and_map",
    "java_hashmap_capacity",
    "java_hashmap_order",
    "property_value",
    "raw_property_value",
    "reserialised_properties_and_map",
    "trailing_separator_for",
]

_VERSIONS = ("4.9.8", "5.3.3")
_split = str.split
_NAME_VALUE = repeat(NAME_VALUE_SEPARATOR)  # endless: shared by every map() in decode_properties
_MAXSPLIT_1 = repeat(1)


def encode_properties(props: Mapping[str, str | None], *, trailing_separator: bool = True) -> bytes:
    """Serialise in the mapping's iteration order: ``name 0x01 value 0x02`` per pair, UTF-8.

    Pairs whose value is None are skipped (as Java does). ``trailing_separator=False`` drops the
    ``0x02`` after the last pair, which is what a 4.9.8 broker stores.
    """
    text = "".join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}"
        for k, v in props.items()
        if v is not None
    )
    if not trailing_separator and text:
        text = text[:-1]
    return text.encode("utf-8")


def decode_properties(data: bytes | bytearray | memoryview | str) -> dict[str, str]:
    """Parse a properties string with Java ``string2messageProperties`` semantics.

    Java walks ``0x02``-delimited segments; a segment of at least 3 chars is accepted iff its first
    ``0x01`` lies strictly inside it with at least one char on each side. Splitting on ``0x02`` and
    testing each part gives the same result (a part without ``0x01`` would make Java's unbounded
    search land past the segment end, which fails the same test). Later duplicates overwrite
    (keeping the first position, like ``HashMap.put``). Invalid UTF-8 becomes U+FFFD as in Java.
    """
    s = data if isinstance(data, str) else str(data, "utf-8", "replace")
    if not s:
        return {}
    # Fast path (every record the store writes): each pair has a non-empty key and value and
    # keys are distinct; then one C-level dict() over the split pairs is the Java result.
    parts = s.split(PROPERTY_SEPARATOR)
    if not parts[-1]:
        parts.pop()
    try:
        fast = dict(map(_split, parts, _NAME_VALUE, _MAXSPLIT_1))
    except ValueError:  # a part without 0x01
        pass
    else:
        if len(fast) == len(parts) and "" not in fast and "" not in fast.values():
            return fast
    out: dict[str, str] = {}
    for part in s.split(PROPERTY_SEPARATOR):
        if len(part) >= 3:
            kv = part.find(NAME_VALUE_SEPARATOR)
            if 0 < kv < len(part) - 1:
                out[part[:kv]] = part[kv + 1 :]
    return out


def property_value(data: bytes | bytearray | memoryview | str, name: str) -> str | None:
    """``decode_properties(data).get(name)`` without building the map (a reader asking for TAGS
    or KEYS only): the value of the *last* well-formed pair named ``name``.

    Pairs are matched on the raw bytes: a pair starts at byte 0 or just after a 0x02, so
    ``name 0x01`` there starts it, and it counts (Java) iff its value, up to the next 0x02, is
    non-empty. Separators and an ASCII name are single bytes whatever else the UTF-8 holds, so
    the positions agree with the decoded string; only the value found is decoded. Names that are
    empty, non-ASCII or hold a separator, and ``str`` input, go through :func:`decode_properties`.
    """
    plain = name and name.isascii() and NAME_VALUE_SEPARATOR not in name and PROPERTY_SEPARATOR not in name
    if plain and isinstance(data, bytes):
        return raw_property_value(data, name.encode() + b"\x01")
    return decode_properties(data).get(name)


def raw_property_value(data: bytes, key: bytes) -> str | None:
    """:func:`property_value` for a pre-encoded ``key`` = ASCII name + ``b"\\x01"`` (the hot path;
    the name must be non-empty and hold no separator). Matches of ``key`` cannot overlap (only
    its last byte is 0x01), so searching left of a rejected match misses none."""
    head, found, value = data.rpartition(key)
    if not found:
        return None
    if not head or head[-1] == 2:  # the common case: the last match starts a pair
        value = value.partition(b"\x02")[0]
        if value:
            return value.decode("utf-8", "replace")
    end = len(head)
    while True:
        i = data.rfind(key, 0, end)
        if i < 0:
            return None
        if i == 0 or data[i - 1] == 2:  # 0x02: the pair starts here
            v = i + len(key)
            j = data.find(b"\x02", v)
            if j < 0:
                j = len(data)
            if j > v:
                return data[v:j].decode("utf-8", "replace")
        end = i


def java_hashmap_capacity(max_size: int, initial_capacity: int = 16) -> int:
    """Table size of a ``HashMap(initial_capacity)`` after it has held ``max_size`` entries.

    The table is the next power of two >= ``initial_capacity`` and doubles whenever
    ``size > 0.75 * capacity``; it never shrinks on removal.
    """
    cap = 1
    while cap < max(initial_capacity, 1):
        cap <<= 1
    while max_size > cap * 3 // 4:
        cap <<= 1
    return cap


def _bucket(key: str, capacity: int) -> int:
    h = java_hash(key) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


def java_hashmap_order(
    keys: Iterable[str], initial_capacity: int = 16, *, max_size: int | None = None
) -> list[str]:
    """Iteration order of a ``java.util.HashMap`` into which ``keys`` were put in this order.

    Buckets ascend; keys sharing a bucket keep insertion order (resizes split buckets stably, and
    new keys go to the bucket's tail). A repeated key keeps its first position. ``max_size`` is the
    largest size the map ever reached, if entries were removed afterwards (capacity never
    shrinks). Treeified buckets (>= 8 collisions) are not emulated.
    """
    unique = list(dict.fromkeys(keys))
    cap = java_hashmap_capacity(max(len(unique), max_size or 0), initial_capacity)
    order = sorted(range(len(unique)), key=lambda i: (_bucket(unique[i], cap), i))
    return [unique[i] for i in order]


def trailing_separator_for(version: str) -> bool:
    """Whether a broker of ``version`` ends the last pair with ``0x02`` (4.9.8 does not)."""
    if version not in _VERSIONS:
        raise ValueError(f"unsupported RocketMQ version {version!r}; expected one of {_VERSIONS}")
    return version != "4.9.8"


@lru_cache(maxsize=1024)
def _broker_order(keys: tuple[str, ...], version: str, drop_wait: bool = False) -> tuple[str, ...]:
    """On-disk key order of a broker map that received ``keys`` in this order (CLUSTER and, for
    5.x, UNIQ_KEY already added). The order depends only on the key sequence and the version, not
    on the values, so it is computed once per distinct key tuple (a handful in any workload).
    4.9.8 serialises the map without WAIT, 5.x with it unless ``drop_wait`` (its multi-dispatch
    put removes WAIT before serialising)."""
    initial = 16 if version == "4.9.8" else 128
    max_size = len(keys)
    if version == "4.9.8" or drop_wait:
        keys = tuple(k for k in keys if k != PROPERTY_WAIT_STORE_MSG_OK)
    return tuple(java_hashmap_order(keys, initial, max_size=max_size))


def _broker_map(
    props: Mapping[str, str], version: str, cluster: str | None, uniq_key: str | None
) -> dict[str, str]:
    """The broker's map before ordering: None values dropped, UNIQ_KEY (5.x) and CLUSTER added."""
    trailing_separator_for(version)  # validates the version
    m: dict[str, str] = {k: v for k, v in props.items() if v is not None}
    if (
        version != "4.9.8"
        and uniq_key is not None
        and PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in m
    ):
        m[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_key
    if cluster is not None:
        m[PROPERTY_CLUSTER] = cluster
    return m


def broker_properties(
    props: Mapping[str, str],
    version: str = "4.9.8",
    cluster: str | None = None,
    *,
    uniq_key: str | None = None,
) -> dict[str, str]:
    """Order (and amend) a client's properties map as ``SendMessageProcessor`` stores it.

    ``props`` is the client's map in the order of the client's properties string. 4.9.8 parses it
    into ``HashMap()`` (capacity 16), adds ``CLUSTER``, and drops ``WAIT`` before serialising;
    5.3.3 uses ``HashMap(128)``, adds ``UNIQ_KEY`` (``uniq_key``) if absent, adds ``CLUSTER`` and
    keeps ``WAIT``. Returns a dict in the on-disk order (golden #23).
    """
    m = _broker_map(props, version, cluster, uniq_key)
    return {k: m[k] for k in _broker_order(tuple(m), version)}


def encode_broker_properties(
    props: Mapping[str, str],
    version: str = "4.9.8",
    cluster: str | None = None,
    *,
    uniq_key: str | None = None,
) -> bytes:
    """The exact properties bytes a broker of ``version`` stores for a client's map."""
    return encode_broker_properties_and_map(props, version, cluster, uniq_key=uniq_key)[0]


def encode_broker_properties_and_map(
    props: Mapping[str, str],
    version: str = "4.9.8",
    cluster: str | None = None,
    *,
    uniq_key: str | None = None,
    drop_wait: bool = False,
) -> tuple[bytes, dict[str, str] | None]:
    """:func:`encode_broker_properties` plus the map a reader parses back from those bytes.

    The map (on-disk order) is returned only when it is exactly what
    :func:`decode_properties` would produce: every key and value a non-empty ``str`` without
    a separator character. Otherwise it is None and only parsing the bytes gives the reader's
    view (Java drops empty pairs and splits on separators inside values).
    """
    m = _broker_map(props, version, cluster, uniq_key)
    return _serialise(m, _broker_order(tuple(m), version, drop_wait), version)


def encode_scheduled_broker_properties_and_map(
    props: Mapping[str, str],
    version: str,
    cluster: str | None,
    *,
    real_topic: str,
    real_queue_id: int,
    delay_level: str,
    uniq_key: str | None = None,
) -> tuple[bytes, dict[str, str] | None]:
    """:func:`encode_broker_properties_and_map` for a delayed message the broker moves to
    ``SCHEDULE_TOPIC_XXXX`` (spec 2.10): ``REAL_TOPIC`` and ``REAL_QID`` put into the broker's
    map, ``DELAY`` set to ``delay_level`` (the level, capped at the highest one), then the map
    serialised again. 4.9.8 does it in ``CommitLog.asyncPutMessage`` on the map
    ``SendMessageProcessor`` took WAIT out of and put it back into, so WAIT is stored (last in
    its bucket) where a plain message has none; 5.x (broker ``HookUtils``) keeps WAIT where it
    was, as it does for every message.
    """
    m = _broker_map(props, version, cluster, uniq_key)
    if version == "4.9.8" and PROPERTY_WAIT_STORE_MSG_OK in m:
        m[PROPERTY_WAIT_STORE_MSG_OK] = m.pop(PROPERTY_WAIT_STORE_MSG_OK)
    m[PROPERTY_DELAY_TIME_LEVEL] = delay_level
    m[PROPERTY_REAL_TOPIC] = real_topic
    m[PROPERTY_REAL_QUEUE_ID] = str(real_queue_id)
    order = java_hashmap_order(tuple(m), 16 if version == "4.9.8" else 128, max_size=len(m))
    return _serialise(m, tuple(order), version)


def encode_timer_broker_properties_and_map(
    props: Mapping[str, str],
    version: str,
    cluster: str | None,
    *,
    real_topic: str,
    real_queue_id: int,
    timer_out_ms: int,
    uniq_key: str | None = None,
) -> tuple[bytes, dict[str, str] | None]:
    """:func:`encode_broker_properties_and_map` for a timer message the 5.x broker moves to
    ``rmq_sys_wheel_timer`` (``HookUtils.transformTimerMessage``): ``TIMER_OUT_MS``,
    ``REAL_TOPIC`` and ``REAL_QID`` put into the broker's map in that order, then the map
    serialised again (``HashMap(128)`` order; WAIT kept where it was)."""
    m = _broker_map(props, version, cluster, uniq_key)
    m[PROPERTY_TIMER_OUT_MS] = str(timer_out_ms)
    m[PROPERTY_REAL_TOPIC] = real_topic
    m[PROPERTY_REAL_QUEUE_ID] = str(real_queue_id)
    order = java_hashmap_order(tuple(m), 16 if version == "4.9.8" else 128, max_size=len(m))
    return _serialise(m, tuple(order), version)


def reserialised_properties_and_map(props: Mapping[str, str], version: str) -> tuple[bytes, dict[str, str] | None]:
    """``messageProperties2String`` of the map a broker of ``version`` decodes from a stored
    record (``string2messageProperties``: 4.9.8 ``HashMap()``, 5.x ``HashMap(128)``, pairs put in
    ``props``' on-disk order), and the map a reader parses back (or None). What
    ``ScheduleMessageService.messageTimeup`` stores for a delayed message that is due."""
    m = dict(props)
    order = java_hashmap_order(tuple(m), 16 if version == "4.9.8" else 128, max_size=len(m))
    return _serialise(m, tuple(order), version)


def _serialise(m: dict[str, str], order: tuple[str, ...], version: str) -> tuple[bytes, dict[str, str] | None]:
    """``messageProperties2String`` of ``m`` in ``order``, and the map a reader parses back (or
    None, see :func:`encode_broker_properties_and_map`)."""
    pairs = [f"{k}{NAME_VALUE_SEPARATOR}{m[k]}" for k in order]
    text = PROPERTY_SEPARATOR.join(pairs)
    n = len(pairs)
    try:  # str.__len__ raises TypeError for a non-str key or value (then: not clean)
        non_empty = min(map(str.__len__, order)) > 0 and min(map(str.__len__, [m[k] for k in order])) > 0
    except (TypeError, ValueError):  # ValueError: m is empty
        non_empty = False
    clean = (
        non_empty
        and text.count(NAME_VALUE_SEPARATOR) == n
        and text.count(PROPERTY_SEPARATOR) == n - 1
    )
    if n and trailing_separator_for(version):
        text += PROPERTY_SEPARATOR
    return text.encode("utf-8"), ({k: m[k] for k in order} if clean else None)
