"""CLI output: rich tables for people, JSON / JSON lines for scripts. One vocabulary for all."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["console", "print_json", "print_json_lines", "table"]

console = Console(highlight=False)


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    t = Table(title=title, title_justify="left", header_style="bold")
    for c in columns:
        t.add_column(c, overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None or v != v else str(v) for v in row))  # v != v: NaN
    console.print(t)


def _default(o: Any) -> Any:
    if isinstance(o, bytes | bytearray | memoryview):
        return bytes(o).hex()
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if hasattr(o, "__dict__"):
        return o.__dict__
    return str(o)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, default=_default, ensure_ascii=False, indent=2))


def print_json_lines(rows: Iterable[Any]) -> None:
    for row in rows:
        print(json.dumps(row, default=_default, ensure_ascii=False))
