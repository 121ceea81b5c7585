"""Byte surgery on store files: flip, set, zero, truncate, scribble, re-checksum (LevelDB log_test).

Every helper opens the file, changes exactly the bytes it names, and closes it; nothing here
knows about a running store, so damage a store only while it is closed (or killed). Offsets are
byte offsets inside the file (not CommitLog offsets); :func:`file_position` converts.

These exist so tests and notebooks can say "flip bit 3 of byte 120 of the second CommitLog
file" and then assert *where* recovery stopped and *why*.
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

from rmqlab.codec.crc import body_crc
from rmqlab.codec.flags import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from rmqlab.codec.prop_crc import CRC32_RESERVED_LEN, crc32_property, record_crc

__all__ = [
    "body_range",
    "file_position",
    "fix_body_crc",
    "flip_bit",
    "forge_crc32_suffix",
    "forge_crc32_window",
    "forge_prop_crc_zero",
    "injure_randomly",
    "overwrite_tail_with_garbage",
    "read_bytes",
    "set_bytes",
    "truncate_file",
    "zero_range",
]

_INT = struct.Struct(">i")


def file_position(commit_log_offset: int, file_size: int) -> tuple[str, int]:
    """``(20-digit file name, position inside it)`` holding an absolute CommitLog offset."""
    base = commit_log_offset - commit_log_offset % file_size
    return f"{base:020d}", commit_log_offset - base


def read_bytes(path: str | os.PathLike[str], offset: int, length: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


def set_bytes(path: str | os.PathLike[str], offset: int, data: bytes) -> bytes:
    """Overwrite ``len(data)`` bytes at ``offset``; returns the bytes that were there."""
    with open(path, "r+b") as f:
        f.seek(offset)
        old = f.read(len(data))
        f.seek(offset)
        f.write(data)
    return old


def flip_bit(path: str | os.PathLike[str], offset: int, bit: int = 0) -> tuple[int, int]:
    """Invert bit ``bit`` (0 = least significant) of the byte at ``offset``; returns (old, new)."""
    if not 0 <= bit < 8:
        raise ValueError(f"bit must be 0..7, not {bit}")
    old = read_bytes(path, offset, 1)
    if len(old) != 1:
        raise ValueError(f"{path}: offset {offset} is past the end of the file")
    new = old[0] ^ (1 << bit)
    set_bytes(path, offset, bytes([new]))
    return old[0], new


def zero_range(path: str | os.PathLike[str], start: int, end: int | None = None) -> int:
    """Write zeros over ``[start, end)`` (``end`` default: end of file); returns bytes zeroed."""
    size = os.path.getsize(path)
    end = size if end is None else min(end, size)
    if end <= start:
        return 0
    with open(path, "r+b") as f:
        f.seek(start)
        remaining = end - start
        chunk = b"\0" * min(remaining, 1 << 20)
        while remaining > 0:
            n = min(remaining, len(chunk))
            f.write(chunk[:n])
            remaining -= n
    return end - start


def truncate_file(path: str | os.PathLike[str], length: int) -> int:
    """Cut (or extend with zeros) the file to ``length`` bytes; returns the old length."""
    old = os.path.getsize(path)
    os.truncate(path, length)
    return old


def overwrite_tail_with_garbage(
    path: str | os.PathLike[str], from_offset: int, seed: int, length: int | None = None
) -> bytes:
    """Random bytes (``random.Random(seed)``) from ``from_offset`` to the end (or ``length`` bytes).

    The first 8 bytes are re-drawn until they are neither a valid magic nor all zeros, so the
    garbage cannot be mistaken for the normal end of data. Returns what was written.
    """
    size = os.path.getsize(path)
    n = size - from_offset if length is None else min(length, size - from_offset)
    rng = random.Random(seed)
    data = bytearray(rng.randbytes(n))
    from rmqlab.codec import flags

    magics = {flags.MESSAGE_MAGIC_CODE_V1, flags.MESSAGE_MAGIC_CODE_V2, flags.BLANK_MAGIC_CODE}
    while n >= 8 and (_INT.unpack_from(data, 4)[0] in magics or not any(data[:8])):
        data[:8] = rng.randbytes(8)
    set_bytes(path, from_offset, bytes(data))
    return bytes(data)


def body_range(path: str | os.PathLike[str], record_offset: int) -> tuple[int, int]:
    """``(start, end)`` file positions of the body of the record starting at ``record_offset``."""
    head = read_bytes(path, record_offset, 40)
    sys_flag = _INT.unpack_from(head, 36)[0]
    pos = record_offset + 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
    pos += 8 + (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8)
    pos += 12  # reconsume times, prepared transaction offset
    body_len = _INT.unpack(read_bytes(path, pos, 4))[0]
    return pos + 4, pos + 4 + max(0, body_len)


def fix_body_crc(path: str | os.PathLike[str], record_offset: int) -> int:
    """Recompute BODYCRC (``crc32(body) & 0x7FFFFFFF``) of the record at ``record_offset``.

    Use after changing a body on purpose, to make a record that is damaged in a way the CRC does
    not see. Returns the new CRC.
    """
    start, end = body_range(path, record_offset)
    crc = body_crc(read_bytes(path, start, end - start))
    set_bytes(path, record_offset + 8, _INT.pack(crc))
    return crc


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table.append(c)
    return table


def forge_crc32_suffix(prefix: bytes, target: int = 0) -> bytes:
    """Four bytes ``s`` such that ``zlib.crc32(prefix + s) == target``.

    CRC-32 is linear, so any value can be reached by choosing the last four bytes: walk the
    register back from ``target`` to find the four table indices, then forward from the
    register after ``prefix`` to find the bytes that select them. Used to build a body whose
    stored CRC is legitimately 0 (RocketMQ issue 9121).
    """
    import zlib

    table = _crc_table()
    by_top = {t >> 24: i for i, t in enumerate(table)}
    reg = target ^ 0xFFFFFFFF
    indices = []
    for _ in range(4):
        i = by_top[reg >> 24]
        indices.append(i)
        reg = ((reg ^ table[i]) << 8) & 0xFFFFFFFF
    indices.reverse()
    reg = zlib.crc32(prefix) ^ 0xFFFFFFFF
    out = bytearray()
    for i in indices:
        out.append((reg ^ i) & 0xFF)
        reg = (reg >> 8) ^ table[i]
    return bytes(out)


def injure_randomly(root: str | os.PathLike[str], rng: random.Random) -> list[tuple[str, str]]:
    """1-4 random injuries to the files under ``root`` (a closed store): flipped bits, a zeroed
    run, a truncation, bytes appended, a deleted file, or a stray file beside it (named like
    junk, a temp file, an offset, or a 20-digit name past ``Long.MAX_VALUE``), each at a file
    picked at random.
    Returns ``(file relative to root, how)`` per injury, for a failure message; the same
    ``rng`` seed injures a copy of the same store the same way."""
    root = Path(root)
    done: list[tuple[str, str]] = []
    for _ in range(rng.randint(1, 4)):
        files = sorted(p for p in root.rglob("*") if p.is_file())
        if not files:
            break
        path = rng.choice(files)
        size = path.stat().st_size
        how = rng.choice(["flip", "flip", "zero", "truncate", "garbage", "delete", "stray"])
        if how == "stray":  # a file next to it that is none of the store's (a copy tool's leftover...)
            name = rng.choice(["junk", "x.tmp", "123", "99999999999999999999", f"{rng.randrange(10**19):020d}"])
            path = path.with_name(name)
            if path.exists():
                continue
            path.write_bytes(rng.randbytes(rng.randint(0, 300)))
        done.append((str(path.relative_to(root)), how))
        if how == "delete":
            path.unlink()
        elif how == "flip" and size:
            for _ in range(rng.randint(1, 8)):
                flip_bit(path, rng.randrange(size), rng.randrange(8))
        elif how == "zero" and size:
            start = rng.randrange(size)
            zero_range(path, start, min(size, start + rng.randint(1, 4096)))
        elif how == "truncate":
            truncate_file(path, rng.randrange(size + 1))
        elif how == "garbage":
            with open(path, "ab") as f:
                f.write(rng.randbytes(rng.randint(1, 5000)))
    return done


def forge_crc32_window(data: bytes, pos: int, target: int = 0) -> bytes:
    """Four bytes ``x`` such that ``zlib.crc32(data[:pos] + x + data[pos + 4:]) == target``.

    With the length fixed, CRC-32 is affine in the data over GF(2): ``crc(d ^ e) = crc(d) ^
    crc(e) ^ crc(zeros)``. So the 32 bits of the window map linearly onto the 32 CRC bits (a
    bijection for any 32 consecutive bits), and the window is found by Gaussian elimination on
    the CRCs of the 32 single-bit changes.
    """
    import zlib

    base_data = bytearray(data)
    base_data[pos : pos + 4] = bytes(4)
    base = zlib.crc32(base_data)
    rows = []  # (crc change of bit k, the bit k as a 32-bit mask of the window)
    for k in range(32):
        d = bytearray(base_data)
        d[pos + k // 8] ^= 0x80 >> (k % 8)
        rows.append((zlib.crc32(d) ^ base, 1 << (31 - k)))
    want = target ^ base
    solution = 0
    pivots: list[tuple[int, int, int]] = []  # (pivot bit, crc vector, window mask)
    for vec, mask in rows:
        for bit, pv, pm in pivots:
            if vec >> bit & 1:
                vec, mask = vec ^ pv, mask ^ pm
        if vec:
            bit = vec.bit_length() - 1
            pivots = [(b, pv ^ vec, pm ^ mask) if pv >> bit & 1 else (b, pv, pm) for b, pv, pm in pivots]
            pivots.append((bit, vec, mask))
    for bit, pv, pm in pivots:
        if want >> bit & 1:
            want ^= pv
            solution ^= pm
    if want:
        raise ValueError("no window value reaches the target CRC")
    return solution.to_bytes(4, "big")


def forge_prop_crc_zero(path: str | os.PathLike[str], record_offset: int) -> int:
    """Turn the record at ``record_offset`` of a CommitLog file written with the 5.x ``__CRC32#``
    property into one whose CRC really is 0: its FLAG (a free int the producer sets) is chosen so
    that the CRC of the record's first ``TOTALSIZE - 20`` bytes is 0, and the property becomes
    ``"0000000000"`` -- the record a writer makes for a message with that flag. Returns the flag."""
    with open(path, "r+b") as f:
        f.seek(record_offset)
        total = _INT.unpack(f.read(4))[0]
        f.seek(record_offset)
        rec = bytearray(f.read(total))
        covered = bytes(rec[: total - CRC32_RESERVED_LEN])
        rec[16:20] = forge_crc32_window(covered, 16, 0)
        assert record_crc(rec, 0, total) == 0
        rec[total - CRC32_RESERVED_LEN :] = crc32_property(0)
        f.seek(record_offset)
        f.write(rec)
    return int(_INT.unpack_from(rec, 16)[0])
