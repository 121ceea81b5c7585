"""A 5.x-shaped store with a BatchConsumeQueue, built byte by byte with the codecs.

Batched/0 is a batch queue (``queue.type=BatchCQ``): one 46-byte unit per record, inner-batch
records (INNER_BATCH_FLAG and INNER_NUM) among single ones; Plain/0 is a plain queue whose
records are interleaved with Batched/0's in one CommitLog file. Used by ``rmqlab.inspect``'s
tests and by the Spark audit's (``tests/spark/conftest.py``), so each check is tested against a
known layout on both readers.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from rmqlab.codec import batch_consume_queue_unit as bcq
from rmqlab.codec.consume_queue_unit import pack_unit as pack_cq_unit
from rmqlab.codec.flags import INNER_BATCH_FLAG, NEED_UNWRAP_FLAG, PROPERTY_INNER_NUM
from rmqlab.codec.java_hash import java_hash
from rmqlab.codec.message import encode_message
from rmqlab.codec.names import offset_to_file_name as offset_file_name

LOG_FILE = 64 * 1024
BCQ_FILE = bcq.BCQ_STORE_UNIT_SIZE * 4  # rolls every 4 units
BATCHES = [3, 1, 5, 1, 1, 2, 7, 1, 4]  # messages per record of Batched/0
T0 = 1_764_000_000_000

#: (commit log offset, size, tags code, store time, msg base offset, batch size) of a unit
Unit = tuple[int, int, int, int, int, int]


def write_batch_store(root: Path) -> list[Unit]:
    """A 5.x-shaped store: Batched/0 (batch queue) and Plain/0 (plain queue) interleaved in one
    commitlog file. Returns the batch units (offset, size, tags code, store time, base, batch)."""
    log = bytearray()
    units: list[Unit] = []
    base = 0
    for i, n in enumerate(BATCHES):
        inner = n > 1
        props = {"TAGS": "TagB", **({PROPERTY_INNER_NUM: str(n)} if inner else {})}
        rec = encode_message(topic="Batched", body=b"x" * (20 * n), queue_offset=base, commit_log_offset=len(log),
                             sys_flag=(INNER_BATCH_FLAG | NEED_UNWRAP_FLAG) if inner else 0,
                             store_timestamp=T0 + i, born_timestamp=T0 + i, properties=props)
        units.append((len(log), len(rec), java_hash("TagB"), T0 + i, base, n))
        log += rec
        base += n
        plain = encode_message(topic="Plain", body=b"p", queue_offset=i, commit_log_offset=len(log),
                               store_timestamp=T0 + i, born_timestamp=T0 + i, properties={"TAGS": "TagP"})
        os.makedirs(root / "consumequeue" / "Plain" / "0", exist_ok=True)
        with open(root / "consumequeue" / "Plain" / "0" / offset_file_name(0), "ab") as f:
            f.write(pack_cq_unit(len(log), len(plain), java_hash("TagP")))
        log += plain
    os.makedirs(root / "commitlog")
    with open(root / "commitlog" / offset_file_name(0), "wb") as f:
        f.write(bytes(log) + bytes(LOG_FILE - len(log)))
    with open(root / "consumequeue" / "Plain" / "0" / offset_file_name(0), "r+b") as f:
        f.truncate(20 * 64)
    qdir = root / "batchconsumequeue" / "Batched" / "0"
    os.makedirs(qdir)
    for k in range(0, len(units), 4):
        with open(qdir / offset_file_name(k * bcq.BCQ_STORE_UNIT_SIZE), "wb") as f:
            data = b"".join(bcq.pack_unit(*u) for u in units[k:k + 4])
            f.write(data + bytes(BCQ_FILE - len(data)))
    return units


def batch_file(root: Path, index: int) -> Path:
    """The Batched/0 file that holds unit ``index``."""
    return root / "batchconsumequeue" / "Batched" / "0" / offset_file_name(46 * 4 * (index // 4))


def patch_unit(root: Path, index: int, field_pos: int, fmt: str, value: int) -> None:
    """Overwrite one field (at byte ``field_pos`` of the unit, ``struct`` format ``fmt``) of unit ``index``."""
    with open(batch_file(root, index), "r+b") as f:
        f.seek(46 * (index % 4) + field_pos)
        f.write(struct.pack(fmt, value))
