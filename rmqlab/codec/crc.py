"""Body CRC exactly as RocketMQ stores it: CRC-32/IEEE with the top bit cleared (spec 2.5)."""

from __future__ import annotations

import zlib

__all__ = ["body_crc"]


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """``zlib.crc32(body) & 0x7FFFFFFF``; 0 for an empty body (the store's ``UtilAll.crc32``)."""
    if not body:
        return 0
    return zlib.crc32(body) & 0x7FFFFFFF
