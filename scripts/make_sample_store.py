#!/usr/bin/env python3
"""Write ``data/rmqlab-small/``: a small store written by rmqlab, byte-for-byte reproducible.

Deterministic on purpose: a ManualClock (fixed start, UTC, so index file names are fixed), a
seeded ``random.Random``, explicit UNIQ_KEYs (no pid/time in them), stepped services (no
threads), a clean shutdown. Running it twice gives identical files (a test checks this).

Contents: 360 messages on OrderTopic / TopicA / TopicB (4 queues each), tags and keys (some keys
shared between messages, some messages with two keys), bodies of 0-2,000 bytes;
``MessageStoreConfig.small`` sizes: 64 KiB CommitLog files, 64-unit ConsumeQueue files, index
files of 64 slots and 256 items.

Usage: python scripts/make_sample_store.py [OUT_DIR]   (default: data/rmqlab-small; replaced)
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

from rmqlab.clock import ManualClock
from rmqlab.config import MessageStoreConfig
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore

SEED = 20240601
COUNT = 360
START_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z
TOPICS = ("OrderTopic", "TopicA", "TopicB")
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "data" / "rmqlab-small"


def make(out: str | os.PathLike[str]) -> Path:
    """(Re)create the sample store at ``out``; returns its path."""
    root = Path(out)
    if root.exists():
        shutil.rmtree(root)
    rng = random.Random(SEED)
    clock = ManualClock(START_MS)
    config = MessageStoreConfig.small(str(root))
    with MessageStore.open(root, config, clock=clock, threaded=False) as store:
        for i in range(COUNT):
            topic = TOPICS[i % len(TOPICS)]
            keys = [f"k-{i}"] + ([f"shared-{rng.randrange(8)}"] if rng.random() < 0.4 else [])
            body = bytes(rng.randrange(256) for _ in range(rng.choice((0, 16, 120, 700, 2000))))
            store.put_message(Message(
                topic, body, tags=rng.choice(("TagA", "TagB", "TagC", None)), keys=keys, queue_id=rng.randrange(4),
                born_host=("10.0.0.7", 40000 + i % 7), uniq_key=f"0A000007{i:024X}",
            ))
            clock.advance(rng.randrange(1, 400))
            if i % 50 == 49:
                store.step()
        store.step()
    return root


if __name__ == "__main__":
    path = make(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT)
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    print(f"wrote {path} ({total} bytes)")
