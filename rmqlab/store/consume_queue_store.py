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

5.x BatchCQ topics (``queue.type=BatchCQ``, spec §3.8) keep :class:`BatchConsumeQueue` objects
in ``batch_queue_table`` under ``<root>/batchconsumequeue/`` (``batch_store_path``; None on a
4.9.8 store, which has no such queues). As in 5.3.3's ``ConsumeQueueStore``, the kind of a new
queue is the topic's type in its config (``is_batch_topic``) and load refuses a directory whose
kind disagrees with it. The store-wide operations (recover, max physical offset, topic queue
table, truncate, clean, flush, destroy, delete topic) cover both kinds; ``all_queues`` and
``find_consume_queue`` stay plain-only (their callers use the ConsumeQueue API).

Thread-safety: ``find_consume_queue`` may be called from several threads (creation is locked);
the bulk operations (load, recover, truncate, delete, destroy) expect no concurrent appends.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Collection, Iterator, Sequence

import numpy as np

from rmqlab.codec.names import BATCH_CONSUME_QUEUE_DIR, is_lmq_topic
from rmqlab.errors import InvalidTopic
from rmqlab.events import EventBus, RecoveryStep
from rmqlab.files.mapped_file_queue import LoadError
from rmqlab.store.batch_consume_queue import BatchConsumeQueue
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
        batch_store_path: str | None = None,
        batch_file_size: int = 13_800_000,
        batch_topics: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self.store_path = store_path
        # 5.x: where BatchCQ topics' queues live (None: 4.9.8, no BatchConsumeQueue at all)
        self.batch_store_path = batch_store_path
        self.batch_file_size = batch_file_size
        # the BatchCQ topics of the topic config (read at each look: topics.json may change)
        self.batch_topics: Callable[[], Collection[str]] = batch_topics or frozenset
        self.batch_queue_table: dict[str, dict[int, BatchConsumeQueue]] = {}
        self.batch_recovery_steps: list[RecoveryStep] = []  # what the last recover() did to BCQs
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
        self.ext_min_steps: list[RecoveryStep] = []  # ext files recover_topic_queue_table deleted

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

    def find_batch_queue(self, topic: str, queue_id: int, create: bool = True) -> BatchConsumeQueue | None:
        """The BatchConsumeQueue of ``topic``/``queue_id``; created (no file yet) when missing and
        ``create`` is true. Raises ``InvalidTopic``/``ValueError`` for a name or id it rejects."""
        queues = self.batch_queue_table.get(topic)
        bcq = queues.get(queue_id) if queues is not None else None
        if bcq is not None or not create:
            return bcq
        assert self.batch_store_path is not None
        with self._lock:
            bcq = self.batch_queue_table.get(topic, {}).get(queue_id)
            if bcq is None:
                bcq = BatchConsumeQueue(topic, queue_id, self.batch_store_path, self.batch_file_size,
                                        read_only=self.read_only, bus=self.bus)
                self.batch_queue_table.setdefault(topic, {})[queue_id] = bcq
            return bcq

    def batch_queue_for(self, topic: str, queue_id: int, create: bool = True) -> BatchConsumeQueue | None:
        """The BatchConsumeQueue a 5.x ``findOrCreateConsumeQueue`` gives for ``topic``: the one
        in the table, else (``create``) a new one when the topic is BatchCQ and has no plain
        queue of that id yet; None when the queue is (or would be) a plain ConsumeQueue."""
        if self.batch_store_path is None:
            return None
        queues = self.batch_queue_table.get(topic)
        if queues is not None:
            bcq = queues.get(queue_id)
            if bcq is not None:
                return bcq
        if not self.is_batch_topic(topic):
            return None
        plain = self.consume_queue_table.get(topic)
        if plain is not None and queue_id in plain:
            return None
        return self.find_batch_queue(topic, queue_id, create=True) if create else None

    def is_batch_topic(self, topic: str) -> bool:
        """5.x ``QueueTypeUtils.isBatchCq`` of the topic's config (always False on 4.9.8)."""
        return self.batch_store_path is not None and topic in self.batch_topics()

    def batch_topic_names(self) -> frozenset[str]:
        """Topics whose records may go to a BatchConsumeQueue (those with one, and those
        configured BatchCQ): a superset, for dispatch to send them the per-record way, which
        decides exactly (:meth:`batch_queue_for`). Empty on 4.9.8."""
        if self.batch_store_path is None:
            return frozenset()
        table = self.batch_queue_table
        topics = self.batch_topics()
        return frozenset(topics).union(table) if table else frozenset(topics)

    def all_batch_queues(self) -> Iterator[tuple[str, int, BatchConsumeQueue]]:
        """``(topic, queue_id, bcq)`` for every BatchConsumeQueue, in table order."""
        for topic, queues in list(self.batch_queue_table.items()):
            for queue_id, bcq in list(queues.items()):
                yield topic, queue_id, bcq

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
        if not self._load_plain():
            return False
        return self._load_batch()

    def _load_plain(self) -> bool:
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
                if self.batch_store_path is not None and self.is_batch_topic(topic):
                    self.load_error = self._wrong_type(topic, "SimpleCQ", "BatchCQ")
                    return False
                if not cq.load():
                    ext = cq.consume_queue_ext
                    self.load_error = (cq.mapped_file_queue.load_error
                                       or (ext is not None and ext.mapped_file_queue.load_error) or queue_dir)
                    return False
        return True

    @staticmethod
    def _wrong_type(topic: str, expected: str, actual: str) -> str:
        """5.x ``queueTypeShouldBe``: the exception that stops the broker's load."""
        return (f"The queue type of topic: {topic} should be {expected}, but is {actual} (its queues are in "
                f"{'consumequeue' if expected == 'SimpleCQ' else 'batchconsumequeue'}/ but topics.json says "
                f"queue.type={actual}; a 5.x broker refuses to load such a store)")

    def _load_batch(self) -> bool:
        """5.x ``loadConsumeQueues(batchconsumequeue, BatchCQ)``: a BatchConsumeQueue for every
        ``<topic>/<int queueId>/`` dir, each topic's type checked against its config first."""
        root = self.batch_store_path
        if root is None or not os.path.isdir(root):
            return True
        for topic in sorted(os.listdir(root)):
            topic_dir = os.path.join(root, topic)
            if not os.path.isdir(topic_dir):
                continue
            checked = False
            for name in sorted(os.listdir(topic_dir)):
                queue_dir = os.path.join(topic_dir, name)
                queue_id = _parse_java_int(name)
                if queue_id is None or not os.path.isdir(queue_dir):
                    continue
                if not checked:
                    if not self.is_batch_topic(topic):
                        self.load_error = self._wrong_type(topic, "BatchCQ", "SimpleCQ")
                        return False
                    checked = True
                try:
                    bcq = self.find_batch_queue(topic, queue_id)
                except (InvalidTopic, ValueError) as exc:
                    self.skipped.append((topic_dir, getattr(exc, "reason", str(exc))))
                    break
                assert bcq is not None
                if not bcq.load():
                    self.load_error = bcq.mapped_file_queue.load_error or queue_dir
                    return False
        return True

    def recover(self) -> int:
        """``recover()`` every queue; returns the max ``max_physic_offset`` (-1 if none).
        What was done to the queues' ext runs is kept in ``ext_recovery_steps`` (for the plan)."""
        steps: list[RecoveryStep] = []
        for _, _, cq in self.all_queues():
            steps += cq.recover()
        self.ext_recovery_steps = steps
        batch_steps: list[RecoveryStep] = []
        for _, _, bcq in self.all_batch_queues():
            batch_steps += bcq.recover()
        self.batch_recovery_steps = batch_steps
        return self.get_max_phy_offset_in_consume_queue()

    def get_max_phy_offset_in_consume_queue(self) -> int:
        """Max ``getMaxPhysicOffset`` over every queue (-1 if none); a BatchConsumeQueue's is the
        start offset of its last unit's record (5.x ``maxMsgPhyOffsetInCommitLog``)."""
        plain = max((cq.max_physic_offset for _, _, cq in self.all_queues()), default=-1)
        return max((bcq.get_max_physic_offset() for _, _, bcq in self.all_batch_queues()), default=plain)

    def get_dispatched_end(self) -> int:
        """Where the queues' records end in the CommitLog (-1 if none): a plain queue's
        ``max_physic_offset`` (its last record's end) or a BatchConsumeQueue's last record's end
        (its ``getMaxPhysicOffset`` is that record's start). Where dispatch resumes at start: a
        record at a BatchConsumeQueue's max physic offset is in it already (and in the index)."""
        end = max((cq.max_physic_offset for _, _, cq in self.all_queues()), default=-1)
        for _, _, bcq in self.all_batch_queues():
            last = bcq.get_latest_unit()
            if last is not None:
                end = max(end, last[0] + last[1])
        return end

    def recover_topic_queue_table(self, min_phy: int) -> dict[str, int]:
        """``"<topic>-<queueId>" -> max offset in queue`` for every queue, then
        ``correct_min_offset(min_phy)`` on each (``recoverTopicQueueTable``, spec §6.5).
        ``min_phy`` is the CommitLog's min offset. The ext files that deletes are kept in
        ``ext_min_steps`` (for the recovery plan)."""
        table: dict[str, int] = {}
        steps: list[RecoveryStep] = []
        for topic, queue_id, cq in self.all_queues():
            table[f"{topic}-{queue_id}"] = cq.get_max_offset_in_queue()
            steps += cq.correct_min_offset(min_phy)
        self.ext_min_steps = steps
        for topic, queue_id, bcq in self.all_batch_queues():  # 5.x batchTopicQueueTable
            table[f"{topic}-{queue_id}"] = bcq.get_max_offset_in_queue()
            bcq.correct_min_offset(min_phy)
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
        for _, _, bcq in self.all_batch_queues():
            cuts += bcq.truncate_dirty_logic_files(phy_offset)
        return cuts

    def units_past_log(self, phy_offset: int) -> list[RecoveryStep]:
        """What :meth:`truncate_dirty_logic_files` would report, changing nothing."""
        cuts: list[RecoveryStep] = []
        for _, _, cq in self.all_queues():
            cuts += cq.units_past_log(phy_offset)
        for _, _, bcq in self.all_batch_queues():
            cuts += bcq.units_past_log(phy_offset)
        return cuts

    def correct_min_offsets(self, min_phy: int) -> None:
        for _, _, cq in self.all_queues():
            cq.correct_min_offset(min_phy)
        for _, _, bcq in self.all_batch_queues():
            bcq.correct_min_offset(min_phy)

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
        for _, _, bcq in self.all_batch_queues():
            deleted = bcq.delete_expired_file(min_phy)
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
                bqueues = self.batch_queue_table.get(topic)
                cq = bqueues.pop(queue_id, None) if bqueues is not None else None  # type: ignore[assignment]
                if bqueues is not None and not bqueues:
                    del self.batch_queue_table[topic]
        if cq is None:
            return False
        cq.destroy()
        return True

    def destroy_topic(self, topic: str) -> list[int]:
        """Delete every queue of ``topic`` and its directory once empty (5.x ``deleteTopics``);
        returns the queue ids destroyed."""
        ids = list(self.consume_queue_table.get(topic, {})) + list(self.batch_queue_table.get(topic, {}))
        for queue_id in ids:
            self.destroy_queue(topic, queue_id)
        for root in (self.store_path, self.ext_store_path, self.batch_store_path):
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
        queues: list[tuple[str, int, ConsumeQueue | BatchConsumeQueue]] = [*self.all_queues(),
                                                                           *self.all_batch_queues()]
        return [
            (topic, queue_id, last)
            for topic, queue_id, cq in queues
            if not skip(topic) and 0 <= (last := cq.get_last_offset()) < min_phy
        ]

    # --- flush / lifecycle -------------------------------------------------------------------

    def flush(self, least_pages: int) -> bool:
        """Flush every queue; True iff no queue had anything to flush."""
        result = True
        for _, _, cq in self.all_queues():
            result = cq.flush(least_pages) and result
        for _, _, bcq in self.all_batch_queues():
            result = bcq.flush(least_pages) and result
        return result

    def destroy(self) -> None:
        """Delete every queue's files and empty the table (``destroyLogics``)."""
        for _, _, cq in self.all_queues():
            cq.destroy()
        self.consume_queue_table.clear()
        for _, _, bcq in self.all_batch_queues():
            bcq.destroy()
        self.batch_queue_table.clear()

    def shutdown(self) -> None:
        """Unmap every queue's files (nothing is deleted)."""
        for _, _, cq in self.all_queues():
            cq.shutdown()
        for _, _, bcq in self.all_batch_queues():
            bcq.shutdown()


def batch_queues_under_v4(root: str) -> str:
    """Why 4.9.8's rules refuse the store at ``root``, or "": it holds BatchConsumeQueue files
    (``batchconsumequeue/``), which only 5.x writes. 4.9.8 does not know them, so its reput would
    dispatch those topics' records into new ``consumequeue/`` queues, and a 5.x broker (or rmqlab
    as 5.3.3) then refuses the store for good: a BatchCQ topic with plain queues."""
    for d, dirs, files in os.walk(os.path.join(root, BATCH_CONSUME_QUEUE_DIR)):
        dirs.sort()
        if files:
            return (f"{os.path.join(d, min(files))}: a BatchConsumeQueue file, which only RocketMQ 5.x writes: this "
                    "store was written by 5.x. Opened with rocketmq_version='4.9.8' its batch topics' records would be "
                    "dispatched into new consumequeue/ queues, after which 5.x refuses the store; rmqlab's "
                    "MessageStore.open refuses instead. Open it with "
                    "rocketmq_version='5.3.3' (CLI: --rocketmq-version 5.3.3)")
    return ""
