"""ConsumeQueueStore: the table of every topic/queue's ConsumeQueue under ``consumequeue/``.

RocketMQ 4.9.8 keeps this table inside ``DefaultMessageStore`` (``consumeQueueTable``,
``loadConsumeQueue``, ``recoverConsumeQueue``, ``recoverTopicQueueTable``, ``destroyLogics``);
5.x moved it to ``queue/ConsumeQueueStore``. The behaviour is the same for file-based queues;
this module follows it (spec §6.1, §6.5, §8.2).

Directory rules when loading (spec §1): ``<root>/<topic>/<queueId>/``; entries of the root that
are not directories (5.x RocksDB files such as ``CURRENT``, ``*.sst``) are skipped, and so are
queue dirs whose name Java's ``Integer.parseInt`` rejects. Topic dirs whose name is not a valid
topic are skipped too (rmqlab: a name that could escape the store never becomes a path) and
listed in ``skipped``.

Thread-safety: ``find_consume_queue`` may be called from several threads (creation is locked);
the bulk operations (load, recover, truncate, delete, destroy) expect no concurrent appends.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from rmqlab.codec.names import is_lmq_topic
from rmqlab.errors import InvalidTopic
from rmqlab.events import EventBus, RecoveryStep
from rmqlab.files.mapped_file_queue import LoadError
from rmqlab.store.consume_queue import ConsumeQueue

__all__ = ["ConsumeQueueStore"]

_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _parse_java_int(name: str) -> int | None:
    """``Integer.parseInt(name)``: optional sign, ASCII digits, within int32; else None."""
    if not _JAVA_INT.fullmatch(name):
        return None
    value = int(name)
    return value if -(2**31) <= value < 2**31 else None


class ConsumeQueueStore:
    """``consume_queue_table[topic][queue_id] -> ConsumeQueue`` plus the store-wide operations."""

    def __init__(
        self,
        store_path: str,
        mapped_file_size: int,
        *,
        rocketmq_version: str = "4.9.8",
        read_only: bool = False,
        bus: EventBus | None = None,
        ext_store_path: str | None = None,
        ext_file_size: int = 48 * 1024 * 1024,
        bit_map_length: int = 64,
    ) -> None:
        self.store_path = store_path
        # enableConsumeQueueExt: every queue gets an ext run under this root (None: off)
        self.ext_store_path = ext_store_path
        self.ext_file_size = ext_file_size
        self.bit_map_length = bit_map_length
        self.mapped_file_size = mapped_file_size
        self.rocketmq_version = rocketmq_version
        self.read_only = read_only
        self.bus = bus
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.skipped: list[tuple[str, str]] = []  # (path, reason) of dirs load() ignored
        self.load_error: LoadError | str = ""  # why load() returned False: the file and its sizes
        self._lock = threading.Lock()
        self.lmq_queue_count = 0  # queues of %LMQ% topics (DefaultMessageStore.lmqConsumeQueueNum)
        self.ext_recovery_steps: list[RecoveryStep] = []  # what the last recover() did to ext runs

    def _new_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(
            topic,
            queue_id,
            self.store_path,
            self.mapped_file_size,
            rocketmq_version=self.rocketmq_version,
            read_only=self.read_only,
            bus=self.bus,
            ext_store_path=self.ext_store_path,
            ext_file_size=self.ext_file_size,
            bit_map_length=self.bit_map_length,
        )

    def find_consume_queue(
        self, topic: str, queue_id: int, create: bool = True
    ) -> ConsumeQueue | None:
        """The queue for ``topic``/``queue_id``; created (empty, no file yet) when missing and
        ``create`` is true, as RocketMQ does on first dispatch or first read.

        Raises ``InvalidTopic`` for a topic name RocketMQ would reject.
        """
        queues = self.consume_queue_table.get(topic)
        if queues is not None:
            cq = queues.get(queue_id)
            if cq is not None or not create:
                return cq
        elif not create:
            return None
        with self._lock:
            cq = self.consume_queue_table.get(topic, {}).get(queue_id)
            if cq is None:
                cq = self._new_queue(topic, queue_id)  # validates first: no entry if invalid
                self.consume_queue_table.setdefault(topic, {})[queue_id] = cq
                if is_lmq_topic(topic):
                    self.lmq_queue_count += 1
            return cq

    def all_queues(self) -> Iterator[tuple[str, int, ConsumeQueue]]:
        """``(topic, queue_id, cq)`` for every queue, topics and ids in table order."""
        for topic, queues in list(self.consume_queue_table.items()):
            for queue_id, cq in list(queues.items()):
                yield topic, queue_id, cq

    # --- load / recover ----------------------------------------------------------------------

    def load(self) -> bool:
        """Create and load a ConsumeQueue for every ``<topic>/<int queueId>/`` dir.

        False as soon as one queue fails to load (a file of the wrong size), as RocketMQ does.
        A missing root is an empty store (True).
        """
        self.load_error = ""
        if not os.path.isdir(self.store_path):
            return True
        for topic in sorted(os.listdir(self.store_path)):
            topic_dir = os.path.join(self.store_path, topic)
            if not os.path.isdir(topic_dir):
                continue
            for name in sorted(os.listdir(topic_dir)):
                queue_dir = os.path.join(topic_dir, name)
                queue_id = _parse_java_int(name)
                if queue_id is None or not os.path.isdir(queue_dir):
                    continue
                try:
                    cq = self.find_consume_queue(topic, queue_id)
                except InvalidTopic as exc:
                    self.skipped.append((topic_dir, exc.reason))
                    break
                assert cq is not None
                if not cq.load():
                    ext = cq.consume_queue_ext
                    self.load_error = (cq.mapped_file_queue.load_error
                                       or (ext is not None and ext.mapped_file_queue.load_error) or queue_dir)
                    return False
        return True

    def recover(self) -> int:
        """``recover()`` every queue; returns the max ``max_physic_offset`` (-1 if none).
        What was done to the queues' ext runs is kept in ``ext_recovery_steps`` (for the plan)."""
        steps: list[RecoveryStep] = []
        for _, _, cq in self.all_queues():
            steps += cq.recover()
        self.ext_recovery_steps = steps
        return self.get_max_phy_offset_in_consume_queue()

    def get_max_phy_offset_in_consume_queue(self) -> int:
        return max((cq.max_physic_offset for _, _, cq in self.all_queues()), default=-1)

    def recover_topic_queue_table(self, min_phy: int) -> dict[str, int]:
        """``"<topic>-<queueId>" -> max offset in queue`` for every queue, then
        ``correct_min_offset(min_phy)`` on each (``recoverTopicQueueTable``, spec §6.5).
        ``min_phy`` is the CommitLog's min offset."""
        table: dict[str, int] = {}
        for topic, queue_id, cq in self.all_queues():
            table[f"{topic}-{queue_id}"] = cq.get_max_offset_in_queue()
            cq.correct_min_offset(min_phy)
        return table

    # --- write path --------------------------------------------------------------------------

    def put_message_position_info(
        self, topic: str, queue_id: int, offset: int, size: int, tags_code: int, cq_offset: int,
        store_timestamp: int = 0,
    ) -> bool:
        """Dispatch a record's unit to its queue (creating the queue if needed); with ext runs
        the ext unit too (``ConsumeQueue.put_message_position_info_wrapper``)."""
        cq = self.find_consume_queue(topic, queue_id)
        assert cq is not None
        if cq.consume_queue_ext is not None:
            return cq.put_message_position_info_wrapper(offset, size, tags_code, store_timestamp, cq_offset)
        return cq.put_message_position_info(offset, size, tags_code, cq_offset)

    def group_rows(self, topics: Sequence[str], queue_ids: np.ndarray, rows: np.ndarray,
                   topic_ids: tuple[np.ndarray, list[str]] | None = None) -> list[tuple[ConsumeQueue, np.ndarray]]:
        """The queue of each of ``rows`` (record numbers, ascending): ``[(queue, its rows)]``.

        Queues are looked up (and created) in order of first appearance, as one dispatch per
        record would create them; ``InvalidTopic`` is raised before anything is written.
        ``topic_ids`` (a topic number per record, the names) saves mapping the strings.
        """
        if len(rows) == 0:
            return []
        if topic_ids is not None:
            tid = np.asarray(topic_ids[0], dtype=np.int64)[rows]
            topic_of = topic_ids[1]
        else:
            sel = topics if len(rows) == len(topics) else [topics[i] for i in rows.tolist()]
            names = {t: k for k, t in enumerate(dict.fromkeys(sel))}
            tid = np.fromiter(map(names.__getitem__, sel), np.int64, len(rows))
            topic_of = list(names)
        key = (tid << 32) | (np.asarray(queue_ids, dtype=np.int64)[rows] & 0xFFFFFFFF)
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        starts = np.concatenate(([0], np.flatnonzero(sorted_key[1:] != sorted_key[:-1]) + 1))
        bounds = np.append(starts, len(rows))
        groups = []
        for g in np.argsort(order[starts], kind="stable").tolist():  # first appearance order
            a, b = int(bounds[g]), int(bounds[g + 1])
            k = int(sorted_key[a])
            qid = k & 0xFFFFFFFF
            cq = self.find_consume_queue(topic_of[k >> 32], qid - (1 << 32) if qid >= 1 << 31 else qid)
            assert cq is not None
            groups.append((cq, rows[order[a:b]]))
        return groups

    # --- truncate / clean --------------------------------------------------------------------

    def truncate_dirty_logic_files(self, phy_offset: int) -> list[RecoveryStep]:
        """``truncate_dirty_logic_files(phy_offset)`` on every queue (CommitLog ends there);
        returns the steps of units cut for ending past the log (rmqlab beyond RocketMQ)."""
        cuts: list[RecoveryStep] = []
        for _, _, cq in self.all_queues():
            cuts += cq.truncate_dirty_logic_files(phy_offset)
        return cuts

    def units_past_log(self, phy_offset: int) -> list[RecoveryStep]:
        """What :meth:`truncate_dirty_logic_files` would report, changing nothing."""
        cuts: list[RecoveryStep] = []
        for _, _, cq in self.all_queues():
            cuts += cq.units_past_log(phy_offset)
        return cuts

    def correct_min_offsets(self, min_phy: int) -> None:
        for _, _, cq in self.all_queues():
            cq.correct_min_offset(min_phy)

    def delete_expired_files(
        self, min_phy: int, sleep_between: Callable[[], object] | None = None
    ) -> int:
        """``deleteExpiredFile(min_phy)`` on every queue (CleanConsumeQueueService, spec §8.2).

        ``sleep_between`` is called after each queue that deleted something (RocketMQ sleeps
        ``deleteConsumeQueueFilesInterval`` = 100 ms there). Returns the total files deleted.
        """
        total = 0
        for _, _, cq in self.all_queues():
            deleted = cq.delete_expired_file(min_phy)
            total += deleted
            if deleted > 0 and sleep_between is not None:
                sleep_between()
        return total

    def destroy_queue(self, topic: str, queue_id: int) -> bool:
        """Delete one queue's files and drop it from the table (and the topic when it was the
        topic's last queue); False if there was no such queue."""
        with self._lock:
            queues = self.consume_queue_table.get(topic)
            cq = queues.pop(queue_id, None) if queues is not None else None
            if queues is not None and not queues:
                del self.consume_queue_table[topic]
            if cq is not None and is_lmq_topic(topic):
                self.lmq_queue_count -= 1
        if cq is None:
            return False
        cq.destroy()
        return True

    def destroy_topic(self, topic: str) -> list[int]:
        """Delete every queue of ``topic`` and its directory once empty (5.x ``deleteTopics``);
        returns the queue ids destroyed."""
        ids = list(self.consume_queue_table.get(topic, {}))
        for queue_id in ids:
            self.destroy_queue(topic, queue_id)
        for root in (self.store_path, self.ext_store_path):
            if root is None:
                continue
            try:
                os.rmdir(os.path.join(root, topic))
            except OSError:
                pass  # not empty (a file we do not own), or never created
        return ids

    def expired_queues(self, min_phy: int, skip: Callable[[str], bool]) -> list[tuple[str, int, int]]:
        """``(topic, queue_id, last_offset)`` of every queue ``cleanExpiredConsumerQueue`` would
        destroy: its last unit ends below ``min_phy`` (``getLastOffset() < minCommitLogOffset``;
        -1, an empty last file, is "maybe created just now" and kept) and ``skip(topic)`` is false."""
        return [
            (topic, queue_id, last)
            for topic, queue_id, cq in self.all_queues()
            if not skip(topic) and 0 <= (last := cq.get_last_offset()) < min_phy
        ]

    # --- flush / lifecycle -------------------------------------------------------------------

    def flush(self, least_pages: int) -> bool:
        """Flush every queue; True iff no queue had anything to flush."""
        result = True
        for _, _, cq in self.all_queues():
            result = cq.flush(least_pages) and result
        return result

    def destroy(self) -> None:
        """Delete every queue's files and empty the table (``destroyLogics``)."""
        for _, _, cq in self.all_queues():
            cq.destroy()
        self.consume_queue_table.clear()

    def shutdown(self) -> None:
        """Unmap every queue's files (nothing is deleted)."""
        for _, _, cq in self.all_queues():
            cq.shutdown()
