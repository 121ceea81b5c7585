"""MessageStoreConfig: RocketMQ's ``MessageStoreConfig`` field names in snake_case, same defaults.

One frozen dataclass; change it with :func:`dataclasses.replace` or :meth:`MessageStoreConfig.with_`.
Where RocketMQ's getter adjusts a value (CQ file size rounded up to whole units, disk ratios
clamped), the adjusted value is a property named after the getter's meaning, and the raw field keeps
the name and the default of the Java field. Fields marked "rmqlab" are not RocketMQ's: they select
rmqlab behaviour (which RocketMQ version to emulate, the memory store, the store host).

Sizes are bytes, intervals milliseconds, ``file_reserved_time`` hours, ratios percent (as in Java).
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

from rmqlab.codec.consume_queue_ext_unit import MIN_EXT_FILE_SIZE
from rmqlab.errors import ConfigError

__all__ = ["ASYNC_FLUSH", "SYNC_FLUSH", "MessageStoreConfig"]

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
CQ_STORE_UNIT_SIZE = 20
_VERSIONS = ("4.9.8", "5.3.3")
# RocketMQ options whose field exists (same name and default) but whose behaviour rmqlab does not
# have: accepting True would silently write or check other bytes than RocketMQ (spec §2.6, §2.12)
_NOT_IMPLEMENTED = {
    "duplication_enable": "5.x keeps client store timestamps and queue offsets, and recovery "
                          "requires a DUP_INFO property",
}
# what a field of each annotation may hold (the annotations are strings: postponed evaluation)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "bool": (bool,), "str": (str,), "float": (float, int),
    "str | None": (str, type(None)), "int | None": (int, type(None)),
}
_PATH_FIELDS = frozenset({"store_path_root_dir", "store_path_commit_log"})
_NP_BOOLS = ("bool", "bool_")  # numpy 2's and 1's boolean scalar types
# 5.x-only options: 4.9.8's MessageStoreConfig has no such field, so True cannot mean anything there
_V5_ONLY = {
    "enabled_append_prop_crc": "the 20-byte __CRC32# property appended to every record",
    "force_verify_prop_crc": "recovery checking __CRC32# instead of the body CRC",
}


@dataclass(frozen=True)
class MessageStoreConfig:
    # --- paths -----------------------------------------------------------------------------
    store_path_root_dir: str = field(default_factory=lambda: os.path.expanduser("~/store"))
    store_path_commit_log: str | None = None  # None: <root>/commitlog

    # --- file sizes --------------------------------------------------------------------------
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * CQ_STORE_UNIT_SIZE
    # 5.x mapperFileSizeBatchConsumeQueue: BatchCQ topics' files, 300,000 units of 46 bytes (spec §3.8)
    mapper_file_size_batch_consume_queue: int = 300_000 * 46
    enable_consume_queue_ext: bool = False
    mapped_file_size_consume_queue_ext: int = 48 * 1024 * 1024
    bit_map_length_consume_queue_ext: int = 64
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    max_msgs_num_batch: int = 64
    message_index_enable: bool = True
    message_index_safe: bool = False
    # multi-dispatch (LMQ): units of a record that names extra queues in INNER_MULTI_DISPATCH
    # go to those queues too (spec §3.2); %LMQ% queues in queue id 0 with enable_lmq
    enable_multi_dispatch: bool = False
    enable_lmq: bool = False
    max_lmq_consume_queue_num: int = 20000  # with both on: puts naming queues refused past this many LMQ queues

    # --- limits ------------------------------------------------------------------------------
    max_message_size: int = 1024 * 1024 * 4
    max_filter_message_size: int = 16000
    default_query_max_num: int = 32  # query_message's max_num when none is given
    # 5.x: V2 records (2-byte topic length) for topics of more than 127 chars (retry topics of
    # long groups); off, such a put is refused (5.x would write an unreadable V1 record)
    auto_message_version_on_topic_len: bool = True
    # 5.x enabledAppendPropCRC: every record written ends with a 20-byte __CRC32# property holding
    # the CRC-32 of the record before it (codec/prop_crc.py, spec §2.6); 4.9.8 refuses True
    enabled_append_prop_crc: bool = False
    # 5.x forceVerifyPropCRC: recovery (with check_crc_on_recover) checks __CRC32# instead of the
    # body CRC, and a record without it fails (spec §2.12); never the reput; 4.9.8 refuses True
    force_verify_prop_crc: bool = False

    # --- flush / commit ----------------------------------------------------------------------
    flush_disk_type: str = ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_commit_log_timed: bool = True
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 1000 * 10
    commit_interval_commit_log: int = 200
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval: int = 200
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 1000 * 60
    sync_flush_timeout: int = 1000 * 5
    # 5.x only: whether an async put wakes the flush service (no pool) or the commit service
    # (pool); 4.9.8 always wakes them (and refuses wake_commit_when_put_message=False). A wake
    # makes the flush run early only with flush_commit_log_timed=False (interruptible wait).
    wake_flush_when_put_message: bool = False
    wake_commit_when_put_message: bool = True
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5
    fast_fail_if_no_buffer_in_store_pool: bool = False
    warm_mapped_file_enable: bool = False
    flush_least_pages_when_warm_mapped_file: int = 1024 / 4 * 16  # type: ignore[assignment]
    # a queueing lock or a spin lock in Java; rmqlab has one lock (store/put_lock.py): no effect
    use_reentrant_lock_when_put_message: bool = True

    # --- recovery ----------------------------------------------------------------------------
    check_crc_on_recover: bool = True
    duplication_enable: bool = False

    # --- cleanup -----------------------------------------------------------------------------
    clean_resource_interval: int = 10000
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    destroy_mapped_file_interval_forcibly: int = 1000 * 120
    redelete_hanged_file_interval: int = 1000 * 120
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    file_reserved_time: int = 72
    clean_file_forcibly_enable: bool = True
    disk_space_clean_forcibly_ratio: int = 85  # 5.x config; 4.9.8 reads a system property, 0.85
    disk_space_warning_level_ratio: int = 90  # 5.x config; 4.9.8 reads a system property, 0.90
    delete_file_batch_max: int = 10

    # --- reading -----------------------------------------------------------------------------
    max_transfer_bytes_on_message_in_memory: int = 1024 * 256
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 1024 * 64
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    offset_check_in_slave: bool = False
    put_msg_index_hight_water: int = 600000  # sized 3.x's dispatch queue: no effect in 4.9.8 or 5.x
    # 5.x estimateMessageCount (MessageStore.estimate_message_count): a filtered estimate scans at
    # most max_consume_queue_scan units, and scales what it saw once more than
    # sample_count_threshold units matched (both count units, in a BatchConsumeQueue too)
    max_consume_queue_scan: int = 20_000
    sample_count_threshold: int = 5000

    # --- roles and misc ----------------------------------------------------------------------
    broker_role: str = "ASYNC_MASTER"
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    flush_delay_offset_interval: int = 1000 * 10
    # puts are refused with OS_PAGECACHE_BUSY while one has held the put lock longer than this
    os_page_cache_busy_timeout_mills: int = 1000
    disk_fall_recorded: bool = True  # broker stats of how far a pull lags (no store effect)
    # --- 5.x timer messages (TimerMessageStore; TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS)
    # A 5.3.3 store keeps a timer message in rmq_sys_wheel_timer until due (store/timer_store.py);
    # off, a 5.3.3 put of one is refused with WHEEL_TIMER_NOT_ENABLE. 4.9.8 has no timer messages.
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    timer_roll_window_slot: int = 3600 * 24 * 2  # slots; out of [2, 7 days - 60] means 7 days - 60
    timer_flush_interval_ms: int = 1000
    timer_max_delay_sec: int = 3600 * 24 * 3
    timer_congest_num_each_slot: int = 2**31 - 1  # a put is refused (flow control) past this per slot
    # drop (True) a timer message whose put back fails for a reason other than an illegal
    # message, instead of retrying it until it passes (store/timer_store.py)
    timer_skip_unknown_error: bool = False

    # --- rmqlab ------------------------------------------------------------------------------
    rocketmq_version: str = "4.9.8"  # rmqlab: which RocketMQ behaviour to emulate where they differ
    store_host: str = "127.0.0.1:10911"  # rmqlab: the broker address written into every record
    broker_cluster_name: str = "DefaultCluster"  # rmqlab: value of the CLUSTER property
    memory_topic_enable: bool = False  # rmqlab: MemoryMessageStore switch
    memory_store_max_ratio: float = 0.75  # rmqlab: share of available memory memory topics may hold
    memory_store_max_bytes: int | None = None  # rmqlab: explicit threshold overriding the ratio
    # rmqlab: in a threaded store, producers wait while dispatch (reput) is this many CommitLog
    # bytes behind, until it is half as far behind; 0: never wait. See MessageStore.put_message.
    max_dispatch_behind_bytes: int = 16 << 20

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "flush_least_pages_when_warm_mapped_file", int(self.flush_least_pages_when_warm_mapped_file)
        )
        self._check_types()
        if self.rocketmq_version not in _VERSIONS:
            raise ConfigError(f"rocketmq_version must be one of {_VERSIONS}, not {self.rocketmq_version!r}")
        if self.flush_disk_type not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ConfigError(f"flush_disk_type must be ASYNC_FLUSH or SYNC_FLUSH, not {self.flush_disk_type!r}")
        for name in ("mapped_file_size_commit_log", "mapped_file_size_consume_queue",
                     "max_hash_slot_num", "max_index_num", "max_message_size"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if self.enable_consume_queue_ext and self.mapped_file_size_consume_queue_ext < MIN_EXT_FILE_SIZE:
            raise ConfigError("mapped_file_size_consume_queue_ext must hold one 20-byte ext unit and the 4 bytes "
                              f"a file keeps for its end marker (>= 24), not {self.mapped_file_size_consume_queue_ext}")
        if self.timer_precision_ms <= 0 or self.mapped_file_size_timer_log <= 0:
            raise ConfigError(f"timer_precision_ms and mapped_file_size_timer_log must be positive, not "
                              f"{self.timer_precision_ms} and {self.mapped_file_size_timer_log}")
        for name, what in _V5_ONLY.items():
            if getattr(self, name) and self.is_v4:
                raise ConfigError(f"{name}=True needs rocketmq_version='5.3.3': RocketMQ 4.9.8 has no such option "
                                  f"({what} is 5.x only)")
        if self.is_v4 and not self.wake_commit_when_put_message:
            raise ConfigError("wake_commit_when_put_message=False needs rocketmq_version='5.3.3': RocketMQ 4.9.8 "
                              "has no such option and always wakes the commit service after a put")
        for name, what in _NOT_IMPLEMENTED.items():
            if getattr(self, name):
                raise ConfigError(f"{name}=True is not implemented by rmqlab ({what}); RocketMQ's default "
                                  "False is the only supported value")
        if self.store_path_commit_log and "," in self.store_path_commit_log:
            raise ConfigError(
                f"store_path_commit_log {self.store_path_commit_log!r} lists several directories (RocketMQ splits it "
                "on ',': a multi-path CommitLog, MultiPathMappedFileQueue), which rmqlab does not implement; RocketMQ "
                "loads the files of every path as one queue sorted by name, so link (or copy) them all into one "
                "directory and open that (a name in two paths, RocketMQ issue 8859: keep the file that holds data)")
        if self.max_dispatch_behind_bytes < 0:
            bound = self.max_dispatch_behind_bytes
            raise ConfigError(f"max_dispatch_behind_bytes must be >= 0 (0: never wait), not {bound}")

    def _check_types(self) -> None:
        """Every field holds its annotated type: a ``"72"`` file reserved time or a ``"yes"``
        switch would otherwise be taken (truthy, or failing later, far from the cause). Numpy
        integers and booleans become the Python values they are; the two path fields take any
        path-like (``pathlib.Path``)."""
        for f in fields(self):
            value = getattr(self, f.name)
            allowed = _FIELD_TYPES[f.type]  # (postponed annotations: the type's source text)
            if f.name in _PATH_FIELDS and isinstance(value, os.PathLike):
                object.__setattr__(self, f.name, os.fspath(value))
                continue
            if isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in _NP_BOOLS):
                if bool in allowed:
                    object.__setattr__(self, f.name, bool(value))
                    continue
            elif isinstance(value, allowed):
                continue
            elif int in allowed and hasattr(value, "__index__"):
                object.__setattr__(self, f.name, operator.index(value))
                continue
            want = " or ".join("None" if t is type(None) else t.__name__ for t in allowed)
            raise ConfigError(f"{f.name} must be {want}, not {type(value).__name__} {value!r}")

    # --- derived values (RocketMQ getters) ----------------------------------------------------
    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_file_size(self) -> int:
        """``getMappedFileSizeConsumeQueue``: rounded up to a whole number of 20-byte units."""
        units = -(-self.mapped_file_size_consume_queue // CQ_STORE_UNIT_SIZE)
        return units * CQ_STORE_UNIT_SIZE

    @property
    def index_file_size(self) -> int:
        return 40 + self.max_hash_slot_num * 4 + self.max_index_num * 20

    @property
    def disk_max_used_space_ratio_value(self) -> float:
        """``getDiskMaxUsedSpaceRatio`` clamped to [10, 95], as a fraction."""
        return min(max(self.disk_max_used_space_ratio, 10), 95) / 100.0

    @property
    def disk_space_clean_forcibly_ratio_value(self) -> float:
        """5.x clamps to [0.30, 0.85]; 4.9.8 uses 0.85 unclamped (system property default)."""
        value = self.disk_space_clean_forcibly_ratio / 100.0
        return value if self.is_v4 else min(max(value, 0.30), 0.85)

    @property
    def disk_space_warning_level_ratio_value(self) -> float:
        """5.x clamps to [0.35, 0.90]; 4.9.8 uses 0.90 unclamped."""
        value = self.disk_space_warning_level_ratio / 100.0
        return value if self.is_v4 else min(max(value, 0.35), 0.90)

    def get_message_window_units(self, max_msg_nums: int) -> int:
        """How many consume queue units one ``getMessage`` reads at most. 4.9.8:
        ``for (i = 0; i < max(16000, maxMsgNums * 20); i += 20)``; 5.x breaks at the first unit
        with ``(queueOffset - offset) * 20 > max(maxFilterMessageSize, maxMsgNums * 20)``, which
        reads one unit more."""
        unit = CQ_STORE_UNIT_SIZE
        if self.is_v4:
            return max(16000, max_msg_nums * unit) // unit
        return max(self.max_filter_message_size, max_msg_nums * unit) // unit + 1

    @property
    def is_v4(self) -> bool:
        return self.rocketmq_version.startswith("4.")

    @property
    def is_sync_flush(self) -> bool:
        return self.flush_disk_type == SYNC_FLUSH

    @property
    def max_record_size(self) -> int:
        """Whole-record limit in the encoder: ``maxMessageSize + 64 KiB``, capped at int max."""
        return min(self.max_message_size + 64 * 1024, 2**31 - 1)

    @property
    def delay_level_table(self) -> dict[int, int]:
        """``messageDelayLevel`` parsed: level (1-based) -> delay in ms."""
        unit = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        table: dict[int, int] = {}
        for level, token in enumerate(self.message_delay_level.split(" "), start=1):
            table[level] = int(token[:-1]) * unit[token[-1]]
        return table

    def with_(self, **changes: Any) -> MessageStoreConfig:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)

    @classmethod
    def small(cls, store_path_root_dir: str, **changes: Any) -> MessageStoreConfig:
        """Tiny sizes for tests and notebooks, so files roll after a few messages.

        The same sizes the reference stores were written with: 64 KiB CommitLog files,
        64-unit ConsumeQueue files, index files of 64 slots and 256 items.
        """
        base = dict(
            store_path_root_dir=store_path_root_dir,
            mapped_file_size_commit_log=64 * 1024,
            mapped_file_size_consume_queue=64 * CQ_STORE_UNIT_SIZE,
            max_hash_slot_num=64,
            max_index_num=256,
        )
        base.update(changes)
        return cls(**base)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]
