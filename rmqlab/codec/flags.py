"""Constants shared by several on-disk layouts: magic codes, sys-flag bits, property keys.

Every value is RocketMQ's (``MessageDecoder``, ``MessageSysFlag``, ``MessageConst``); the spec
section is named beside each group so a reader can check it (rocketmq-store-spec.md).
"""

from __future__ import annotations

__all__ = [
    "BLANK_MAGIC_CODE",
    "BORNHOST_V6_FLAG",
    "COMPRESSED_FLAG",
    "COMPRESSION_TYPE_MASK",
    "CRC32_RESERVED_LEN",
    "END_FILE_MIN_BLANK_LENGTH",
    "INNER_BATCH_FLAG",
    "KEY_SEPARATOR",
    "MESSAGE_MAGIC_CODE_V1",
    "MESSAGE_MAGIC_CODE_V2",
    "MULTI_TAGS_FLAG",
    "NAME_VALUE_SEPARATOR",
    "NEED_UNWRAP_FLAG",
    "PROPERTY_CLUSTER",
    "PROPERTY_CRC32",
    "PROPERTY_DELAY_TIME_LEVEL",
    "PROPERTY_DUP_INFO",
    "PROPERTY_INNER_BASE",
    "PROPERTY_INNER_MULTI_DISPATCH",
    "PROPERTY_INNER_MULTI_QUEUE_OFFSET",
    "PROPERTY_INNER_NUM",
    "PROPERTY_KEYS",
    "PROPERTY_MAX_RECONSUME_TIMES",
    "PROPERTY_PRODUCER_GROUP",
    "PROPERTY_REAL_QUEUE_ID",
    "PROPERTY_REAL_TOPIC",
    "PROPERTY_RECONSUME_TIME",
    "PROPERTY_RETRY_TOPIC",
    "PROPERTY_SEPARATOR",
    "PROPERTY_TAGS",
    "PROPERTY_TIMER_DELAY_MS",
    "PROPERTY_TIMER_DELAY_SEC",
    "PROPERTY_TIMER_DELIVER_MS",
    "PROPERTY_TIMER_DEL_UNIQKEY",
    "PROPERTY_TIMER_DEQUEUE_MS",
    "PROPERTY_TIMER_ENQUEUE_MS",
    "PROPERTY_TIMER_OUT_MS",
    "PROPERTY_TIMER_ROLL_TIMES",
    "PROPERTY_TRANSACTION_ID",
    "PROPERTY_TRANSACTION_PREPARED",
    "PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET",
    "PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX",
    "PROPERTY_WAIT_STORE_MSG_OK",
    "SCHEDULE_TOPIC",
    "STOREHOSTADDRESS_V6_FLAG",
    "TIMER_TOPIC",
    "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_NOT_TYPE",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_ROLLBACK_TYPE",
    "TRANSACTION_TYPE_MASK",
    "compression_type",
    "transaction_type",
]

# --- magic codes (spec 2.3, golden #1) --------------------------------------------------------
MESSAGE_MAGIC_CODE_V1 = -626843481  # 0xDAA320A7, 1-byte (signed) topic length
MESSAGE_MAGIC_CODE_V2 = -626843477  # 0xDAA320AB, 2-byte topic length; 5.x only
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194, end-of-file filler
END_FILE_MIN_BLANK_LENGTH = 8  # int size + int magic (spec 2.4)

# --- sys-flag bits (spec 2.2) ---------------------------------------------------------------
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700


def transaction_type(sys_flag: int) -> int:
    """The transaction type bits (``sys_flag & 0xC``): NOT, PREPARED, COMMIT or ROLLBACK."""
    return sys_flag & TRANSACTION_TYPE_MASK


def compression_type(sys_flag: int) -> int:
    """Compression type ``(flag & 0x700) >> 8``: 1 LZ4, 2 ZSTD, 3 ZLIB; 0 means ZLIB (legacy)."""
    return (sys_flag & COMPRESSION_TYPE_MASK) >> 8


# --- properties (spec 2.6) -------------------------------------------------------------------
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_INNER_NUM = "INNER_NUM"
PROPERTY_INNER_BASE = "INNER_BASE"
PROPERTY_DUP_INFO = "DUP_INFO"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
PROPERTY_CRC32 = "__CRC32#"
# 5.x timer messages (spec 1.1): a due time, or a delay in seconds or milliseconds from now
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"  # set by the broker on the record it keeps in TIMER_TOPIC
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"  # set when the wheel hands the message back
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"  # times a far message was parked and put back (ROLL)
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"  # a delete marker: the UNIQ_KEY it cancels
CRC32_RESERVED_LEN = len(PROPERTY_CRC32) + 1 + 10 + 1  # 20 bytes at the record's end (5.x)

# --- topics ------------------------------------------------------------------------------------
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # delayed messages live here until due (spec 2.10)
TIMER_TOPIC = "rmq_sys_wheel_timer"  # 5.x timer messages live here until due (spec 1.1)
