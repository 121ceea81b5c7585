"""``TimerWheel.check_phy_pos`` / ``get_all_num`` (read at every open of a 5.x store) equal a
slot-by-slot reading of the wheel: file slots, dirty slots over them, ticks of other windows,
slot 0 holding tick 0, negative and zero fields."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqlab.store.timer_files import TimerWheel

SLOTS_TOTAL = 16  # 32 slots: windows wrap quickly
N = 2 * SLOTS_TOTAL
PRECISION = 1000
LONG_MAX = 2**63 - 1


def _reference(wheel: TimerWheel, time_start_ms: int, max_offset: int) -> tuple[int, int]:
    """RocketMQ's loops, one slot at a time: slot i is valid when it holds the tick i stands for
    in the window from ``time_start_ms``."""
    start = time_start_ms // PRECISION
    best, total = LONG_MAX, 0
    for i in range(N):
        s = wheel.raw_slot(i)
        if s.time != start + (i - start % N) % N:
            continue
        total += s.num
        if s.last_pos > max_offset:
            best = min(best, s.first_pos)
    return best, total


_slot = st.tuples(st.integers(0, N - 1), st.integers(-3, 3 * N), st.integers(-5, 500), st.integers(-5, 500),
                  st.integers(-2, 9))


@settings(max_examples=150)
@given(flushed=st.lists(_slot, max_size=40), dirty=st.lists(_slot, max_size=10),
       start_tick=st.integers(0, 2 * N), max_offset=st.integers(-10, 600))
def test_scan_equals_slot_by_slot(tmp_path_factory, flushed, dirty, start_tick, max_offset) -> None:
    path = Path(tmp_path_factory.mktemp("wheel")) / "timerwheel"
    wheel = TimerWheel(str(path), PRECISION, SLOTS_TOTAL)
    try:
        for idx, tick_shift, first, last, num in flushed:
            tick = idx + N * (tick_shift // N)  # a tick that maps to this slot (some of another window)
            wheel.put_slot(tick * PRECISION, first, last, num, 0)
        wheel.flush()
        for idx, tick_shift, first, last, num in dirty:
            wheel.put_slot((idx + N * (tick_shift // N)) * PRECISION, first, last, num, 0)
        for time_start_ms in (start_tick * PRECISION, start_tick * PRECISION + PRECISION // 2):
            best, total = _reference(wheel, time_start_ms, max_offset)
            assert wheel.check_phy_pos(time_start_ms, max_offset) == best
            assert wheel.get_all_num(time_start_ms) == total
    finally:
        wheel.close()


def test_an_empty_wheel_from_time_zero(tmp_path: Path) -> None:
    """Slot 0 of a never-written wheel holds tick 0: valid for a window starting at 0, with nothing in it."""
    wheel = TimerWheel(str(tmp_path / "timerwheel"), PRECISION, SLOTS_TOTAL)
    try:
        assert wheel.check_phy_pos(0, -1) == 0  # lastPos 0 > -1: that slot's firstPos
        assert wheel.check_phy_pos(0, 0) == LONG_MAX
        assert wheel.get_all_num(0) == 0
        assert wheel.check_phy_pos(5 * PRECISION, -1) == LONG_MAX
    finally:
        wheel.close()
