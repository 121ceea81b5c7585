"""Message ids: the offset msgId (store host + commitlog offset) and the client UNIQ_KEY.

Offset msgId (spec 2.8): ``hex_upper(ip 4|16 bytes + int port + long offset)`` -> 32 or 56 chars.
UNIQ_KEY (spec 2.9, golden #11): ``FIX_STRING + hex8(now - monthStart) + hex4(counter)`` with
``FIX_STRING = hex_upper(ip + short pid + int classLoaderHash)``. Time comes in as an argument so
the codec stays clock-free.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import struct
from functools import lru_cache

from rmqlab.errors import RmqlabError

__all__ = [
    "InvalidMessageId",
    "UniqKeyGenerator",
    "create_offset_msg_id",
    "decode_offset_msg_id",
    "ip_to_bytes",
    "month_start_ms",
    "uniq_key",
    "uniq_key_fix_string",
]

_PORT_OFFSET = struct.Struct(">iq")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_ONE_MS = _dt.timedelta(milliseconds=1)


class InvalidMessageId(RmqlabError, ValueError):
    """A string that is not an offset msgId (wrong length or not hex)."""

    def __init__(self, msg_id: str, reason: str) -> None:
        self.msg_id = msg_id
        self.reason = reason
        super().__init__(f"invalid message id {msg_id!r}: {reason}")


@lru_cache(maxsize=1024)
def ip_to_bytes(ip: str) -> bytes:
    """4 (IPv4) or 16 (IPv6) network-order bytes of an address string; cached for the hot path."""
    return ipaddress.ip_address(ip).packed


def create_offset_msg_id(ip: str, port: int, offset: int) -> str:
    """``createMessageId``: upper hex of store ip + int port + long commitlog offset."""
    return (ip_to_bytes(ip) + _PORT_OFFSET.pack(port, offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Inverse of :func:`create_offset_msg_id`: ``(ip, port, offset)``.

    32 chars means IPv4, 56 means IPv6 (Java treats every other length as IPv6 and then fails
    on the short buffer; here anything else is an :class:`InvalidMessageId`).
    """
    if len(msg_id) not in (32, 56):
        raise InvalidMessageId(msg_id, "length must be 32 (IPv4) or 56 (IPv6) hex chars")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise InvalidMessageId(msg_id, "not hexadecimal") from None
    ip_len = 4 if len(raw) == 16 else 16
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
    return str(ipaddress.ip_address(raw[:ip_len])), port, offset


def uniq_key_fix_string(ip: str | bytes, pid: int, class_loader_hash: int) -> str:
    """The per-process prefix: upper hex of ip bytes + ``short(pid)`` + ``int(classLoaderHash)``."""
    ip_bytes = ip if isinstance(ip, bytes) else ip_to_bytes(ip)
    return (
        (ip_bytes + struct.pack(">HI", pid & 0xFFFF, class_loader_hash & 0xFFFFFFFF)).hex().upper()
    )


def uniq_key(fix_string: str, now_ms: int, start_ms: int, counter: int) -> str:
    """``createUniqID`` with explicit inputs: ``fix + hex8(int(now - start)) + hex4(counter)``.

    A difference in (-1,000,000, 0) ms is clamped to 0 (clock stepped back a little), as in Java.
    """
    diff = now_ms - start_ms
    diff = ((diff + 0x80000000) & 0xFFFFFFFF) - 0x80000000  # Java (int) cast
    if -1_000_000 < diff < 0:
        diff = 0
    return f"{fix_string}{diff & 0xFFFFFFFF:08X}{counter & 0xFFFF:04X}"


def _to_ms(d: _dt.datetime) -> int:
    return (d - _EPOCH) // _ONE_MS


def month_start_ms(now_ms: int, tz: _dt.tzinfo) -> tuple[int, int]:
    """``(start, next_start)``: first instants of this and the next month in ``tz``."""
    now = _EPOCH + _dt.timedelta(milliseconds=now_ms)
    local = now.astimezone(tz)
    start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    nxt = start.replace(year=year, month=month)
    return _to_ms(start), _to_ms(nxt)


class UniqKeyGenerator:
    """``MessageClientIDSetter`` for one simulated process: fixed prefix, month start, counter.

    Not thread-safe; callers that share one across threads must lock around :meth:`create`.
    """

    def __init__(self, ip: str, pid: int, class_loader_hash: int) -> None:
        self.fix_string = uniq_key_fix_string(ip, pid, class_loader_hash)
        self.counter = 0
        self._start_ms = 0
        self._next_start_ms = 0  # forces a month computation on the first call

    def create(self, now_ms: int, tz: _dt.tzinfo) -> str:
        """Next UNIQ_KEY at ``now_ms``; month start recomputed once ``now`` passes it."""
        counter = self.counter
        self.counter = (counter + 1) & 0xFFFFFFFF
        return f"{self.time_prefix(now_ms, tz)}{counter & 0xFFFF:04X}"

    def time_prefix(self, now_ms: int, tz: _dt.tzinfo) -> str:
        """The key without its 4 counter digits: ``fix + hex8(now - monthStart)``.

        Uses no counter, so writers can share one generator across threads and draw counters
        from an atomic source (``itertools.count``); a racing month roll only recomputes the
        same month twice.
        """
        if now_ms >= self._next_start_ms:
            self._start_ms, self._next_start_ms = month_start_ms(now_ms, tz)
        diff = now_ms - self._start_ms
        if 0 <= diff < 0x80000000:  # the usual case: one f-string, no int-cast arithmetic
            return f"{self.fix_string}{diff:08X}"
        return uniq_key(self.fix_string, now_ms, self._start_ms, 0)[:-4]
