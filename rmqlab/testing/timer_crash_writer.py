"""A 5.3.3 store putting timer messages with its real background services, to be SIGKILLed
(``python -m rmqlab.testing.timer_crash_writer STORE_DIR ACK_LOG COUNT``; tests/crash).

Prints ``READY`` once the store is open, then puts ``COUNT`` messages to ``Orders`` queue 0 with
``TIMER_DELAY_MS`` between 0.2 and 3 s, pausing a little between puts so the kill lands while
some are delivered, some are in the wheel and some are not yet enqueued; after each acknowledged
put it appends ``{"body": ..., "out_ms": ...}`` to the ack log (flushed, no fsync: a SIGKILL keeps
the page cache, as it keeps the store's mappings). Then it idles with its services running.
"""

from __future__ import annotations

import json
import sys
import time

from rmqlab.config import MessageStoreConfig
from rmqlab.files.fs import FixedDiskUsage
from rmqlab.store.message import Message
from rmqlab.store.message_store import MessageStore


def main(argv: list[str] | None = None) -> int:
    store_dir, ack_log, count = (argv or sys.argv[1:])[:3]
    config = MessageStoreConfig.small(store_dir, rocketmq_version="5.3.3", timer_flush_interval_ms=200,
                                      mapped_file_size_timer_log=52 * 20 + 16)
    store = MessageStore.open(store_dir, config, threaded=True, disk_probe=FixedDiskUsage(0.5))  # not the real disk
    print("READY", flush=True)
    with open(ack_log, "a", encoding="utf-8") as acks:
        for i in range(int(count)):
            delay = 200 + (i * 137) % 2800
            r = store.put_message(Message("Orders", f"t{i}".encode(), properties={"TIMER_DELAY_MS": str(delay)}))
            if r.ok:
                rec = store.look_message_by_offset(r.wrote_offset)
                out = rec.properties.get("TIMER_OUT_MS") if rec is not None else None
                acks.write(json.dumps({"body": f"t{i}", "out_ms": out}) + "\n")
                acks.flush()
            time.sleep(0.01)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
