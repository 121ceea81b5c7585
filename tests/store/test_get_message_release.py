"""``GetMessageResult.release`` (inlined per-message release) with shared and own selections."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rmqlab import MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.store.message import Message
from rmqlab.store.results import GetMessageResult, GetMessageStatus, SharedSelection, StoredMessage


def test_release_drops_every_reference_once(tmp_path: Path) -> None:
    store = MessageStore.open(tmp_path / "s", MessageStoreConfig.small(str(tmp_path / "s")),
                              clock=ManualClock(), threaded=False)
    try:
        offs = [store.put_message(Message("TopicR", bytes([i]) * 80)).wrote_offset for i in range(4)]
        cl = store.commit_log
        mf = cl.mapped_file_queue.mapped_files[0]
        size = store.put_message(Message("TopicR", b"z" * 80)).wrote_bytes
        assert mf.ref_count == 1
        shared = SharedSelection(cl.select_from(offs[0]))  # one file reference for three messages
        msgs = []
        for off in offs[:3]:
            a = off - shared.start
            shared.acquire()
            msgs.append(StoredMessage(shared, shared.buffer[a : a + size], off, size))
        shared.release()  # the creator's count
        own = cl.get_message(offs[3], size)  # a message with its own selection
        assert own is not None
        msgs.append(StoredMessage(own, own.buffer, offs[3], size))
        exported = np.frombuffer(msgs[1].buffer, dtype=np.uint8)  # an exported view stays valid
        assert mf.ref_count == 3
        result = GetMessageResult(GetMessageStatus.FOUND, messages=msgs)
        assert [m.decode().body[0] for m in msgs] == [0, 1, 2, 3]
        result.release()
        assert mf.ref_count == 1
        assert bytes(exported[:4]) == size.to_bytes(4, "big")  # still readable: its TOTALSIZE
        with pytest.raises(ValueError, match="released"):
            bytes(msgs[0].buffer)
        result.release()  # twice: nothing more is released
        msgs[2].release()
        assert mf.ref_count == 1
    finally:
        store.shutdown()
