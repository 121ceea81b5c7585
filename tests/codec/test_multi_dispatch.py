"""codec.multi_dispatch: reading INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET as RocketMQ's dispatcher does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqlab.codec.multi_dispatch import (
    is_multi_dispatch_unit,
    java_split,
    multi_dispatch_pairs,
    multi_dispatch_queue_ids,
)
from rmqlab.codec.properties import decode_properties, encode_properties


@pytest.mark.parametrize(("text", "want"), [
    ("a", ["a"]), ("", [""]), ("a,b", ["a", "b"]), ("a,b,", ["a", "b"]), ("a,,", ["a"]), (",", []),
    (",,", []), (",a", ["", "a"]), ("a,,b", ["a", "", "b"]),
])
def test_java_split_drops_trailing_empty_strings_only(text: str, want: list[str]) -> None:
    assert java_split(text, ",") == want


def _md(queues: str | None, offsets: str | None) -> dict[str, str]:
    d = {}
    if queues is not None:
        d["INNER_MULTI_DISPATCH"] = queues
    if offsets is not None:
        d["INNER_MULTI_QUEUE_OFFSET"] = offsets
    return d


@pytest.mark.parametrize(("queues", "offsets", "want"), [
    ("%LMQ%a", "0", (("%LMQ%a", 0),)),
    ("%LMQ%a,%LMQ%b", "7,+3", (("%LMQ%a", 7), ("%LMQ%b", 3))),
    ("%LMQ%a,%LMQ%b,", "7,3,", (("%LMQ%a", 7), ("%LMQ%b", 3))),  # Java's split drops the trailing ""
    ("%LMQ%a", str(2**63 - 1), (("%LMQ%a", 2**63 - 1),)),
    (None, "0", ()),                       # nothing to dispatch
    ("   ", "0", ()),                      # StringUtils.isBlank
    ("%LMQ%a", None, ()),                  # no offsets: the dispatcher cannot place it
    ("%LMQ%a,%LMQ%b", "1", ()),            # counts differ: logged, nothing dispatched
    ("%LMQ%a", " 1", ()),                  # Long.parseLong takes no spaces
    ("%LMQ%a", "1_0", ()),                 # ... nor Python's digit separators
    ("%LMQ%a", "٣", ()),                   # ... nor non-ASCII digits
    ("%LMQ%a", str(2**63), ()),            # ... nor values past a long
])
def test_pairs(queues: str | None, offsets: str | None, want: tuple) -> None:
    assert multi_dispatch_pairs(_md(queues, offsets)) == want


def test_queue_ids_lmq_names_may_sit_in_queue_0() -> None:
    assert multi_dispatch_queue_ids("%LMQ%a", 3) == (3, 0)
    assert multi_dispatch_queue_ids("%LMQ%a", 0) == (0,)
    assert multi_dispatch_queue_ids("Fanout", 3) == (3,)


def test_is_multi_dispatch_unit() -> None:
    pairs = (("%LMQ%a", 5), ("Fanout", 2))
    assert is_multi_dispatch_unit(pairs, 3, "%LMQ%a", 0, 5)
    assert is_multi_dispatch_unit(pairs, 3, "%LMQ%a", 3, 5)  # enableLmq off: the record's queue id
    assert is_multi_dispatch_unit(pairs, 3, "Fanout", 3, 2)
    assert not is_multi_dispatch_unit(pairs, 3, "Fanout", 0, 2)  # not an LMQ name: its own queue id only
    assert not is_multi_dispatch_unit(pairs, 3, "%LMQ%a", 0, 6)  # another queue offset
    assert not is_multi_dispatch_unit(pairs, 3, "%LMQ%b", 0, 5)  # a queue it does not name
    assert not is_multi_dispatch_unit((), 3, "%LMQ%a", 0, 5)


_name = st.text(st.sampled_from("abcXYZ09-_%"), min_size=1, max_size=12)


@given(st.lists(st.tuples(_name, st.integers(0, 2**63 - 1)), min_size=1, max_size=6))
def test_pairs_read_back_what_a_broker_writes(pairs: list[tuple[str, int]]) -> None:
    raw = encode_properties({"INNER_MULTI_DISPATCH": ",".join(n for n, _ in pairs),
                             "INNER_MULTI_QUEUE_OFFSET": ",".join(str(o) for _, o in pairs)})
    assert multi_dispatch_pairs(decode_properties(raw)) == tuple(pairs)


def test_dispatches_multi_by_version() -> None:
    from rmqlab.codec.multi_dispatch import dispatches_multi

    for topic in ("Chat", "%RETRY%g", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "%LMQ%a"):
        assert dispatches_multi(topic, "4.9.8")
    assert dispatches_multi("Chat", "5.3.3")
    assert dispatches_multi("%LMQ%a", "5.3.3")
    for topic in ("%RETRY%g", "SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer"):
        assert not dispatches_multi(topic, "5.3.3")
