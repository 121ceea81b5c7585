"""The store API refuses arguments of the wrong type at once (``InvalidArgument``, a TypeError).

Before, ``get_message("g", "T", "0", 0, 8)`` answered NO_MESSAGE_IN_QUEUE for a queue holding
messages (a str queue id is no queue), a ``None`` topic or key answered as an empty queue, and a
float offset or a ``str`` timestamp failed deep inside with an unrelated TypeError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rmqlab import InvalidArgument, Message, MessageStore, MessageStoreConfig
from rmqlab.clock import ManualClock
from rmqlab.store.results import GetMessageStatus


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = MessageStore.open(str(tmp_path / "s"), MessageStoreConfig.small(str(tmp_path / "s")),
                          clock=ManualClock(1_700_000_000_000), threaded=False)
    for i in range(5):
        assert s.put_message(Message("T", f"m{i}".encode(), keys=["k"])).ok
    s.step()
    yield s
    s.shutdown()


BAD: dict[str, tuple[Callable[[MessageStore], object], str]] = {
    "str queue id": (lambda s: s.get_message("g", "T", "0", 0, 8), "queue_id must be an int, not str '0'"),
    "float offset": (lambda s: s.get_message("g", "T", 0, 1.5, 8), "offset must be an int, not float 1.5"),
    "bool queue id": (lambda s: s.get_message("g", "T", True, 0, 8), "queue_id must be an int, not bool"),
    "None topic": (lambda s: s.get_message("g", None, 0, 0, 8), "topic must be a str, not NoneType"),
    "str max nums": (lambda s: s.get_message("g", "T", 0, 0, "8"), "max_msg_nums must be an int"),
    "None key": (lambda s: s.query_message("T", None), "key must be a str"),
    "str max num": (lambda s: s.query_message("T", "k", max_num="3"), "max_num must be an int"),
    "float begin": (lambda s: s.query_message("T", "k", begin=0.5), "begin must be an int"),
    "str timestamp": (lambda s: s.get_offset_in_queue_by_time("T", 0, "now"), "timestamp must be an int"),
    "str min queue": (lambda s: s.get_min_offset_in_queue("T", "0"), "queue_id must be an int"),
    "bytes max topic": (lambda s: s.get_max_offset_in_queue(b"T", 0), "topic must be a str"),
    "str cl offset": (lambda s: s.look_message_by_offset("0"), "commit_log_offset must be an int"),
    "float cq offset": (lambda s: s.get_commit_log_offset_in_queue("T", 0, 1.0), "consume_queue_offset"),
    "None store time": (lambda s: s.get_message_store_timestamp("T", 0, None), "consume_queue_offset"),
    "None put": (lambda s: s.put_message(None), "put_message takes a rmqlab.Message, not NoneType"),
    "bytes put": (lambda s: s.put_message(b"x"), "put_message takes a rmqlab.Message, not bytes"),
    "None in batch": (lambda s: s.put_messages([Message("T", b"a"), None]), "put_messages takes a MessageBatch"),
    "str batch": (lambda s: s.put_messages("abc"), "put_messages takes a MessageBatch"),
    "no batch": (lambda s: s.put_messages(None), "put_messages takes a MessageBatch"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_wrong_types_are_refused_naming_the_argument(store: MessageStore, case: str) -> None:
    call, said = BAD[case]
    before = store.get_max_phy_offset()
    with pytest.raises(InvalidArgument, match=said.replace("(", r"\(").replace(".", r"\.")):
        call(store)
    with pytest.raises(TypeError):  # and it is a TypeError, as Python code expects
        call(store)
    assert store.get_max_phy_offset() == before  # nothing written


def test_numpy_ints_are_the_ints_they_are(store: MessageStore) -> None:
    # offsets read out of a DataFrame are numpy integers
    with store.get_message("g", "T", np.int64(0), np.int32(1), np.int64(8)) as got:
        assert got.status is GetMessageStatus.FOUND
        assert [m.body for m in got.messages] == [b"m1", b"m2", b"m3", b"m4"]
    assert store.get_max_offset_in_queue("T", np.int64(0)) == 5
    assert store.look_message_by_offset(np.int64(0)).body == b"m0"
    assert len(store.query_message("T", "k", max_num=np.int64(2)).phy_offsets) == 2
