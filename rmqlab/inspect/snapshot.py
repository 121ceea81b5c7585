"""Read-only snapshots of any store dir: a broker's live dir, a copy, or a damaged copy.

``open_snapshot(path)`` maps every CommitLog file with ``ACCESS_READ``. It never creates,
truncates, deletes, locks or writes anything: no ``lock`` taken, no ``abort`` or ``checkpoint``
written, no recovery run. Damage is reported (file and offset), never repaired.

A CommitLog file shorter than the configured size (a trimmed sample, see ``data/README.md``) is
accepted as the last file: its missing tail counts as unwritten space.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from rmqlab.codec.message import BlankRecord, MessageRecord
from rmqlab.codec.names import parse_offset_file_name
from rmqlab.codec.walk import iter_records
from rmqlab.errors import CorruptRecord, NotAStore
from rmqlab.files.mapped_file import MappedFile

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Damage", "StoreSnapshot", "open_snapshot"]

_STORE_MARKERS = ("commitlog", "consumequeue", "index", "checkpoint")


@dataclass(frozen=True)
class Damage:
    """Where a walk had to stop before the end of a file, and why."""

    file: str
    offset: int  # absolute CommitLog offset
    reason: str
    detail: str


class StoreSnapshot:
    """A read-only view of one store dir. Use as a context manager or call :meth:`close`."""

    def __init__(self, path: str, *, commit_log_file_size: int | None = None) -> None:
        self.path = os.path.abspath(path)
        if not os.path.isdir(self.path):
            raise NotAStore(self.path, "no such directory")
        entries = set(os.listdir(self.path))
        if not entries & set(_STORE_MARKERS):
            raise NotAStore(self.path, "not a RocketMQ store (no commitlog/, consumequeue/, index/ or checkpoint)")
        self.commit_log_dir = os.path.join(self.path, "commitlog")
        names = []
        if os.path.isdir(self.commit_log_dir):
            for name in os.listdir(self.commit_log_dir):
                full = os.path.join(self.commit_log_dir, name)
                if os.path.isfile(full) and parse_offset_file_name(name) is not None:
                    names.append(name)
        names.sort()
        sizes = [os.path.getsize(os.path.join(self.commit_log_dir, n)) for n in names]
        self.commit_log_file_size = commit_log_file_size or self._infer_file_size(names, sizes)
        self.commit_log_files: list[MappedFile] = []
        try:
            for name, size in zip(names, sizes, strict=True):
                if size == 0:
                    continue
                self.commit_log_files.append(
                    MappedFile(os.path.join(self.commit_log_dir, name), self.commit_log_file_size, read_only=True)
                )
        except BaseException:
            self.close()
            raise
        self.abort_present = os.path.exists(os.path.join(self.path, "abort"))

    @staticmethod
    def _infer_file_size(names: list[str], sizes: list[int]) -> int:
        """Largest file size, or the distance between consecutive file names if larger."""
        size = max(sizes, default=0)
        offsets = [parse_offset_file_name(n) or 0 for n in names]
        gaps = [b - a for a, b in pairwise(offsets) if b > a]
        return max([size, *gaps[:1]]) or 1024 * 1024 * 1024

    # ------------------------------------------------------------------ walking
    def iter_records(
        self, *, start: int | None = None, check_crc: bool = False, damage: list[Damage] | None = None
    ) -> Iterator[tuple[str, int, MessageRecord | BlankRecord]]:
        """Yield ``(file name, absolute offset, record)`` over the whole log, in order.

        A damaged record ends the walk of its file (like recovery); it is appended to
        ``damage`` when a list is given, else raised as ``CorruptRecord``.
        """
        for mf in self.commit_log_files:
            base = mf.file_from_offset
            if start is not None and base + mf.mapped_length <= start:
                continue
            pos = max(0, start - base) if start is not None else 0
            try:
                for off, rec in iter_records(mf.buffer, pos, check_crc=check_crc, file=mf.file_name,
                                             base_offset=base):
                    yield mf.name, off, rec
            except CorruptRecord as e:
                if damage is None:
                    raise
                damage.append(Damage(mf.name, e.offset, e.reason, e.detail))
            if start is not None and pos > 0:
                start = None

    def iter_messages(self, topic: str | None = None, *, start: int | None = None,
                      damage: list[Damage] | None = None) -> Iterator[MessageRecord]:
        for _, _, rec in self.iter_records(start=start, damage=damage):
            if isinstance(rec, MessageRecord) and (topic is None or rec.topic == topic):
                yield rec

    # ------------------------------------------------------------------ frames
    def messages(self, topic: str | None = None, start: int | None = None, limit: int | None = None) -> pd.DataFrame:
        """One row per message (bodies summarised by length and CRC), in CommitLog order."""
        import pandas as pd

        rows: list[dict[str, Any]] = []
        for rec in self.iter_messages(topic, start=start):
            rows.append(_message_row(rec))
            if limit is not None and len(rows) >= limit:
                break
        return pd.DataFrame(rows, columns=_MESSAGE_COLUMNS)

    def topics(self) -> pd.DataFrame:
        """Per topic and queue: message count, queue offset range, bytes (from the CommitLog)."""
        import pandas as pd

        stats: dict[tuple[str, int], list[int]] = {}
        for rec in self.iter_messages():
            s = stats.setdefault((rec.topic, rec.queue_id), [0, rec.queue_offset, rec.queue_offset, 0])
            s[0] += 1
            s[1] = min(s[1], rec.queue_offset)
            s[2] = max(s[2], rec.queue_offset)
            s[3] += rec.store_size
        rows = [
            {"topic": t, "queue_id": q, "messages": n, "min_queue_offset": lo, "max_queue_offset": hi, "bytes": b}
            for (t, q), (n, lo, hi, b) in sorted(stats.items())
        ]
        return pd.DataFrame(rows, columns=["topic", "queue_id", "messages", "min_queue_offset",
                                           "max_queue_offset", "bytes"])

    def close(self) -> None:
        for mf in self.commit_log_files:
            mf.close()
        self.commit_log_files = []

    def __enter__(self) -> StoreSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_MESSAGE_COLUMNS = [
    "commit_log_offset", "store_size", "topic", "queue_id", "queue_offset", "tags", "tags_code", "keys",
    "uniq_key", "msg_id", "flag", "sys_flag", "born_timestamp", "store_timestamp", "born_host", "store_host",
    "body_length", "body_crc", "crc_ok",
]


def _message_row(rec: MessageRecord) -> dict[str, Any]:
    return {
        "commit_log_offset": rec.commit_log_offset,
        "store_size": rec.store_size,
        "topic": rec.topic,
        "queue_id": rec.queue_id,
        "queue_offset": rec.queue_offset,
        "tags": rec.tags,
        "tags_code": rec.tags_code,
        "keys": " ".join(rec.keys),
        "uniq_key": rec.uniq_key,
        "msg_id": rec.msg_id,
        "flag": rec.flag,
        "sys_flag": rec.sys_flag,
        "born_timestamp": rec.born_timestamp,
        "store_timestamp": rec.store_timestamp,
        "born_host": f"{rec.born_host[0]}:{rec.born_host[1]}",
        "store_host": f"{rec.store_host[0]}:{rec.store_host[1]}",
        "body_length": len(rec.body),
        "body_crc": rec.body_crc,
        "crc_ok": rec.crc_ok,
    }


def open_snapshot(path: str | os.PathLike[str], **kwargs: Any) -> StoreSnapshot:
    """Open ``path`` read-only. Raises ``NotAStore`` when it is not a store dir."""
    return StoreSnapshot(os.fspath(path), **kwargs)
