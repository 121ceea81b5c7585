"""``config/delayOffset.json``: how far each delay level's schedule queue has been delivered.

``ScheduleMessageService`` (owned by the store in 4.9.8, by the broker in 5.x) keeps one offset
per delay level: the next unit of ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` to deliver. It
writes the table with fastjson's pretty format. 4.9.8 (checked against the empty file of the
reference stores and a published non-empty one) writes the ``Integer`` keys unquoted and the
map's entries on one line (the indents are one tab)::

    {
        "offsetTable":{1:3,3:11
        }
    }

and ``{}`` for an empty table. 5.x adds a ``dataVersion`` object; its exact layout is not
checked against a 5.3.3 broker, so rmqlab writes it as standard JSON (keys quoted), which
every fastjson reads back into the same table. Reading accepts both. Pure: no IO.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["DelayOffsetError", "decode_delay_offsets", "encode_delay_offsets"]

#: an unquoted integer key after ``{`` or ``,`` (fastjson writes ``Map<Integer, Long>`` so)
_BARE_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


class DelayOffsetError(ValueError):
    """The text is not a delay offset table (RocketMQ's ``ConfigManager`` then tries ``.bak``)."""


def encode_delay_offsets(
    table: Mapping[int, int], version: str, data_version: Mapping[str, int] | None = None
) -> str:
    """The file content a ``ScheduleMessageService`` of ``version`` writes for ``table``
    (level -> offset; levels ascending, as its ``ConcurrentHashMap`` iterates small ints)."""
    levels = sorted(table)
    if version == "4.9.8":
        body = ",".join(f"{k}:{int(table[k])}" for k in levels)
        return "{\n\t\"offsetTable\":" + ("{" + body + "\n\t}" if body else "{}") + "\n}"
    obj: dict[str, Any] = {}
    if data_version is not None:
        obj["dataVersion"] = dict(data_version)
    obj["offsetTable"] = {str(k): int(table[k]) for k in levels}
    return json.dumps(obj, indent="\t", separators=(",", ":"))


def decode_delay_offsets(text: str) -> tuple[dict[int, int], dict[str, int] | None]:
    """``(level -> offset, dataVersion or None)`` from a file's text; raises
    :class:`DelayOffsetError` when it is not such a table."""
    try:
        obj = json.loads(_BARE_KEY.sub(r'\1"\2"\3', text))
    except ValueError as e:
        raise DelayOffsetError(f"not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise DelayOffsetError("not a JSON object")
    raw = obj.get("offsetTable") or {}
    if not isinstance(raw, dict):
        raise DelayOffsetError("offsetTable is not an object")
    table: dict[int, int] = {}
    for k, v in raw.items():
        try:
            level, offset = int(k), int(v)
        except (TypeError, ValueError):
            raise DelayOffsetError(f"offsetTable entry {k!r}: {v!r} is not level: offset") from None
        if isinstance(v, bool) or not isinstance(v, int | str):
            raise DelayOffsetError(f"offsetTable entry {k!r}: {v!r} is not an offset")
        table[level] = offset
    version = obj.get("dataVersion")
    return table, (dict(version) if isinstance(version, dict) else None)
