"""Golden #1 and the sys-flag helpers."""

from __future__ import annotations

import struct

import pytest

from rmqlab.codec import flags


def _u32(x: int) -> str:
    return struct.pack(">i", x).hex().upper()


def test_magic_codes_golden_1() -> None:
    assert flags.MESSAGE_MAGIC_CODE_V1 == -626843481
    assert _u32(flags.MESSAGE_MAGIC_CODE_V1) == "DAA320A7"
    assert flags.MESSAGE_MAGIC_CODE_V2 == -626843477
    assert _u32(flags.MESSAGE_MAGIC_CODE_V2) == "DAA320AB"
    assert flags.BLANK_MAGIC_CODE == -875286124
    assert _u32(flags.BLANK_MAGIC_CODE) == "CBD43194"
    # TimerLog.BLANK_MAGIC_CODE = 0xBBCCDDEE ^ 1880681586 + 8 (Java: + binds tighter than ^)
    assert (0xBBCCDDEE ^ (1880681586 + 8)) & 0xFFFFFFFF == 0xCBD43194
    assert flags.END_FILE_MIN_BLANK_LENGTH == 8
    assert flags.CRC32_RESERVED_LEN == 20


@pytest.mark.parametrize(
    ("sys_flag", "expected"),
    [
        (0, flags.TRANSACTION_NOT_TYPE),
        (0x4 | 0x10, flags.TRANSACTION_PREPARED_TYPE),
        (0x38, flags.TRANSACTION_COMMIT_TYPE),
        (0xC | 0x1 | 0x300, flags.TRANSACTION_ROLLBACK_TYPE),
    ],
)
def test_transaction_type(sys_flag: int, expected: int) -> None:
    assert flags.transaction_type(sys_flag) == expected


def test_compression_type_zlib_bits() -> None:
    assert flags.compression_type(0x301) == 3
    assert flags.compression_type(0x1) == 0  # legacy: treated as ZLIB by readers
