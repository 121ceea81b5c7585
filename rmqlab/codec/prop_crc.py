"""The optional 5.x ``__CRC32#`` property: a CRC-32 of the whole record kept in its last 20 bytes.

RocketMQ 5.x with ``enabledAppendPropCRC`` (spec §2.6, §2.13, golden #9) reserves
``CRC32_RESERVED_LEN`` = 20 bytes at the very end of every record it appends, after the
properties (with one ``0x02`` first when the properties are non-empty and do not end with
one); PROPERTIESLENGTH and TOTALSIZE count them. Under the put lock, once QUEUEOFFSET,
PHYSICALOFFSET and STORETIMESTAMP are patched, the reserve becomes::

    "__CRC32#" 0x01 d0 d1 ... d9 0x02        crc = crc32(record[0 : TOTALSIZE - 20]) & 0x7FFFFFFF

with d0..d9 the decimal digits of ``crc`` *least-significant first*, padded with '0'
(1774740973 -> "3790474771", 42 -> "2400000000"). It is an ordinary property to readers.

With ``forceVerifyPropCRC`` (and ``checkCRCOnRecover``) 5.x recovery checks it instead of the
body CRC (spec §2.12): the value of ``__CRC32#`` in the parsed map (missing -> failure) read back
by Java's loop -- from the last character to the first, ``expected = expected * 10 + (c - '0')``
in 32-bit int arithmetic -- must equal the CRC of the record's first ``TOTALSIZE - 20`` bytes.
RocketMQ before the fix of its issue 9121 (PR 9122, January 2025) also required
``expected > 0``, so a record whose CRC really is 0 (1 in 2^31) failed; the fix accepts
``expected >= 0``. :func:`check_prop_crc` tells that case apart (``ZERO``): rmqlab accepts it and
the recovery report says what an unfixed broker would have done.

Pure bytes: no IO. Hot loops (recovery's fast walk) call :func:`record_crc` on memoryviews.
"""

from __future__ import annotations

import struct
from typing import Any

from rmqlab.codec.crc import crc32
from rmqlab.codec.flags import (
    BORNHOST_V6_FLAG,
    CRC32_RESERVED_LEN,
    MESSAGE_MAGIC_CODE_V2,
    NAME_VALUE_SEPARATOR,
    PROPERTY_CRC32,
    PROPERTY_SEPARATOR,
    STOREHOSTADDRESS_V6_FLAG,
)

__all__ = [
    "CRC32_RESERVED_LEN",
    "MISMATCH",
    "MISSING",
    "OK",
    "PROP_CRC_PREFIX",
    "ZERO",
    "check_prop_crc",
    "crc32_property",
    "java_expected_crc",
    "prop_crc_mismatches",
    "properties_length_position",
    "record_crc",
    "reserve_prop_crc",
    "reserved_properties_length",
    "seal_prop_crc",
]

#: the first 9 bytes of the reserve once written: name and name/value separator
PROP_CRC_PREFIX = (PROPERTY_CRC32 + NAME_VALUE_SEPARATOR).encode("ascii")
_SEP = PROPERTY_SEPARATOR.encode("ascii")
_INT = struct.Struct(">i")
_H = struct.Struct(">h")
_B = struct.Struct(">b")
_MASK = 0x7FFFFFFF
#: decimal digits of 0..9999 least-significant first, 4 characters each (the 20-byte builder's table)
_DIGITS4 = [f"{i:04d}"[::-1].encode("ascii") for i in range(10000)]

# check_prop_crc results
OK = "ok"  # the property holds the record's CRC (> 0): 5.3.3 accepts it too
ZERO = "zero"  # the record's CRC is 0 and the property says 0: rmqlab accepts, 5.3.3 fails it
MISSING = "missing"  # no properties, or no __CRC32# among them
MISMATCH = "mismatch"  # the property's value is not the record's CRC


def crc32_property(crc: int) -> bytes:
    """The 20 bytes ``"__CRC32#" 0x01 d0..d9 0x02`` for ``crc`` (0 <= crc < 2**31; golden #9):
    ``d0..d9`` its decimal digits, least-significant first, padded with '0'."""
    lo, hi = crc % 10000, crc // 10000
    return b"".join((PROP_CRC_PREFIX, _DIGITS4[lo], _DIGITS4[hi % 10000], _DIGITS4[hi // 10000][:2], _SEP))


def java_expected_crc(value: str) -> int:
    """5.x ``checkMessageAndReturnSize``'s reading of a ``__CRC32#`` value: for each Java char
    (UTF-16 unit) from the last to the first, ``expected = expected * 10 + (c - '0')``, wrapped
    to a Java int at every step. The digits written by :func:`crc32_property` give the CRC back;
    anything else gives whatever Java computes (possibly negative)."""
    units = value.encode("utf-16-be", "surrogatepass")
    expected = 0
    for i in range(len(units) - 2, -1, -2):
        c = (units[i] << 8) | units[i + 1]
        expected = ((expected * 10 + c - 48 + 2**31) & 0xFFFFFFFF) - 2**31
    return expected


def record_crc(buf: Any, offset: int, total: int) -> int:
    """``crc32(buf[offset : offset + total - 20]) & 0x7FFFFFFF``: what the property of the record
    of ``total`` bytes at ``offset`` holds (``buf``: bytes, bytearray, memoryview, mmap view)."""
    return crc32(memoryview(buf)[offset : offset + total - CRC32_RESERVED_LEN]) & _MASK


def check_prop_crc(buf: Any, offset: int, total: int, properties: dict[str, str] | None) -> str:
    """Check the record of ``total`` bytes at ``offset`` against its parsed ``properties``
    (None: the record has none) as 5.x ``forceVerifyPropCRC`` recovery does; returns
    :data:`OK`, :data:`ZERO` (the CRC is 0 and the property says 0: 5.3.3 fails such a record,
    rmqlab accepts it), :data:`MISSING` or :data:`MISMATCH`."""
    value = None if properties is None else properties.get(PROPERTY_CRC32)
    if value is None:
        return MISSING
    expected = java_expected_crc(value)
    if expected < 0 or total < CRC32_RESERVED_LEN or expected != record_crc(buf, offset, total):
        return MISMATCH
    return OK if expected else ZERO


def properties_length_position(buf: Any, offset: int = 0) -> int:
    """Position in ``buf`` of the PROPERTIESLENGTH field of the record at ``offset`` (from its
    sys flag, BODYLENGTH, magic and TOPICLENGTH; the record must be well formed)."""
    sys_flag = _INT.unpack_from(buf, offset + 36)[0]
    bh = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    sh = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
    pos = offset + 68 + bh + sh
    pos += 4 + max(_INT.unpack_from(buf, pos)[0], 0)
    if _INT.unpack_from(buf, offset + 4)[0] == MESSAGE_MAGIC_CODE_V2:
        return pos + 2 + _H.unpack_from(buf, pos)[0]
    return pos + 1 + _B.unpack_from(buf, pos)[0]


def reserved_properties_length(props_len: int, last_byte: int) -> int:
    """PROPERTIESLENGTH once the reserve is added to properties of ``props_len`` bytes ending
    with ``last_byte``: + 1 for the ``0x02`` added when they are non-empty and do not end with
    one, + 20."""
    return props_len + (1 if props_len > 0 and last_byte != 2 else 0) + CRC32_RESERVED_LEN


def reserve_prop_crc(record: bytes | bytearray) -> bytearray:
    """A copy of the encoded ``record`` (its properties last, as encoded) with the reserve
    appended: a ``0x02`` when its properties are non-empty and do not end with one, then 20
    zero bytes; TOTALSIZE and PROPERTIESLENGTH grow to match. The caller checks the new
    lengths first (:func:`reserved_properties_length` <= 32767, the record size limit); ValueError
    for properties that would pass 32767."""
    at = properties_length_position(record)
    plen = _H.unpack_from(record, at)[0]
    new_plen = reserved_properties_length(plen, record[-1])
    if new_plen > 32767:
        raise ValueError(f"properties of {new_plen} bytes with the CRC reserve exceed 32767")
    out = bytearray(record)
    if new_plen - plen > CRC32_RESERVED_LEN:
        out += _SEP
    out += bytes(CRC32_RESERVED_LEN)
    _INT.pack_into(out, 0, len(out))
    _H.pack_into(out, at, new_plen)
    return out


def seal_prop_crc(buf: Any, offset: int, total: int) -> int:
    """Write the ``__CRC32#`` property into the last 20 bytes of the record of ``total`` bytes at
    ``offset`` of the writable ``buf``, from the CRC of the bytes before them; returns the CRC."""
    crc = record_crc(buf, offset, total)
    end = offset + total
    buf[end - CRC32_RESERVED_LEN : end] = crc32_property(crc)
    return crc


def tail_prop_crc_ok(buf: Any, offset: int, total: int) -> bool | None:
    """Whether the record of ``total`` bytes at ``offset`` is whole by its ``__CRC32#`` property:
    None when its last 20 bytes are no such pair (a record written without
    ``enabledAppendPropCRC``), else whether the value (Java's reading) is the CRC of the bytes
    before them. The rule of :func:`prop_crc_mismatches`, for one record."""
    return not prop_crc_mismatches(buf, [offset], [total]) if _has_tail_pair(buf, offset, total) else None


def _has_tail_pair(buf: Any, offset: int, total: int) -> bool:
    if total < CRC32_RESERVED_LEN:
        return False
    tail = bytes(memoryview(buf)[offset + total - CRC32_RESERVED_LEN : offset + total])
    return tail.startswith(PROP_CRC_PREFIX) and tail[-1] == 2


def prop_crc_mismatches(buf: Any, positions: Any, sizes: Any) -> list[tuple[int, str, int]]:
    """For the records at ``positions`` of ``buf`` (``sizes`` bytes each) whose last 20 bytes
    hold a ``__CRC32#`` pair (they start with ``"__CRC32#" 0x01`` and end with ``0x02``), those
    whose value does not give their CRC back (Java's reading, :func:`java_expected_crc`):
    ``(i, stored value, real CRC)``. What a check of a store written with the option finds
    where the body CRC sees nothing (damage in the header, topic or properties)."""
    out = []
    mv = memoryview(buf)
    for i, (p, t) in enumerate(zip(positions, sizes, strict=True)):
        p, t = int(p), int(t)
        if not _has_tail_pair(mv, p, t):
            continue
        value = bytes(mv[p + t - CRC32_RESERVED_LEN + len(PROP_CRC_PREFIX) : p + t - 1]).decode("latin-1")
        real = record_crc(mv, p, t)
        if java_expected_crc(value) != real:
            out.append((i, value, real))
    return out
