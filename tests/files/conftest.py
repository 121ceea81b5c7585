from __future__ import annotations

import pytest

from rmqlab.events import EventBus, EventRecorder


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
def recorder(bus: EventBus) -> EventRecorder:
    return EventRecorder(bus)
