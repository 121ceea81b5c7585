"""Body CRC exactly as RocketMQ stores it: CRC-32/IEEE with the top bit cleared (spec 2.5).

``crc32`` is the one CRC-32/IEEE function of the package's hot paths (put, recovery, get + decode,
scans): ``isal.isal_zlib.crc32`` (python-isal, a core dependency; PCLMULQDQ folding, ~10x zlib
1.2.13's table-driven ``crc32`` on 1 KiB bodies) when importable, else ``zlib.crc32`` -- a fallback
for platforms without an isal wheel. Both are the same function (java.util.zip.CRC32's values,
``crc32(data, value)`` continues from ``value``, ``crc32(b"") == 0``) and take any buffer (bytes,
bytearray, memoryview slices, mmap-backed memoryviews).
"""

from __future__ import annotations

try:
    from isal.isal_zlib import crc32
except ImportError:  # no isal wheel for this platform: zlib gives the same values, ~10x slower
    from zlib import crc32

__all__ = ["body_crc", "crc32"]


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """``crc32(body) & 0x7FFFFFFF``; 0 for an empty body (the store's ``UtilAll.crc32``)."""
    if not body:
        return 0
    return crc32(body) & 0x7FFFFFFF
