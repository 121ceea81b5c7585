"""The read-only API refuses arguments of the wrong type, naming them (``InvalidArgument``).

``snap.consume_queue("TopicA", "0")`` said "no consume queue TopicA/0" of a queue that exists,
and ``snap.messages(topic=5)`` gave an empty frame, as if the store held no such messages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rmqlab import ConfigError, InvalidArgument, open_snapshot

BAD: dict[str, tuple[Callable[[Any], object], str]] = {
    "str queue id": (lambda s: s.consume_queue("TopicA", "0"), "queue_id must be an int, not str '0'"),
    "bytes topic": (lambda s: s.consume_queue(b"TopicA", 0), "topic must be a str, not bytes"),
    "int topic": (lambda s: s.messages(topic=5), "topic must be a str, not int 5"),
    "str queue filter": (lambda s: s.messages(queue_id="1"), "queue_id must be an int"),
    "str start": (lambda s: s.messages(start="0"), "start must be an int, not str '0'"),
    "float limit": (lambda s: s.messages(limit=2.5), "limit must be an int, not float 2.5"),
    "batch str queue": (lambda s: s.batch_consume_queue("TopicA", "0"), "queue_id must be an int"),
    "None key": (lambda s: s.index_chain("TopicA", None), "key must be a str, not NoneType"),
    "str offset": (lambda s: s.read_record("0"), "offset must be an int, not str '0'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_wrong_types_are_refused(reference_store: Callable[[str], Path], case: str) -> None:
    call, said = BAD[case]
    with open_snapshot(reference_store("clean-small")) as snap, pytest.raises(InvalidArgument) as err:
        call(snap)
    assert str(err.value).startswith(said)


def test_numpy_ints_and_negative_windows(reference_store: Callable[[str], Path]) -> None:
    with open_snapshot(reference_store("clean-small")) as snap:
        plain = snap.consume_queue("TopicA", 0, start=1, limit=3)
        numpy = snap.consume_queue("TopicA", np.int64(0), start=np.int64(1), limit=np.int32(3))
        assert plain.equals(numpy)
        assert len(plain) == 3
        assert snap.read_record(np.int64(0)) == snap.read_record(0)
        with pytest.raises(ConfigError, match="limit must be >= 0"):
            snap.messages(limit=-1)
