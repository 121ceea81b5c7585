"""The store the inspection and Spark benchmarks read: 1 KiB messages over 4 topics x 8 queues.

Imported as ``from _workload import write_store`` (the scripts run as ``python bench/<x>.py``,
which puts ``bench/`` first on ``sys.path``).
"""

from __future__ import annotations


def write_store(root: str, total_bytes: int, *, file_size: int, body: int = 1024) -> int:
    """Write messages with rmqlab until the CommitLog holds ``total_bytes``; returns the count."""
    from rmqlab.clock import ManualClock
    from rmqlab.config import MessageStoreConfig
    from rmqlab.store.message import Message
    from rmqlab.store.message_store import MessageStore

    config = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=file_size)
    clock = ManualClock()
    payload = b"x" * body
    n = 0
    with MessageStore.open(root, config, clock=clock, threaded=False) as store:
        while store.get_max_phy_offset() < total_bytes:
            for _ in range(1000):
                store.put_message(Message(f"Bench{n % 4}", payload, tags=f"T{n % 8}", keys=[f"k{n}"], queue_id=n % 8))
                n += 1
                clock.advance(1)
            store.step()
    return n
