"""CLI output: rich tables for people, JSON / JSON lines for scripts. One vocabulary for all."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["console", "emit", "frame_rows", "frame_table", "ms_to_iso", "print_json", "print_json_lines", "table"]

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


def frame_rows(df: Any) -> list[dict[str, Any]]:
    """DataFrame -> JSON-friendly dicts (NaN/NA -> None, numpy scalars -> Python)."""
    out = []
    for rec in df.to_dict(orient="records"):
        out.append({k: _plain(v) for k, v in rec.items()})
    return out


def _plain(v: Any) -> Any:
    if v is None:
        return None
    try:
        if v != v:  # NaN
            return None
    except (TypeError, ValueError):
        pass
    if type(v).__name__ == "NAType":
        return None
    if hasattr(v, "item"):
        return v.item()
    return v


def emit(obj: Any, rows: Iterable[Any] | None, mode: str) -> bool:
    """Print ``obj`` as JSON (mode "json") or ``rows`` as JSON lines (mode "json-lines").

    Returns False for mode "table": the caller prints people-friendly tables itself.
    """
    if mode == "json":
        print_json(obj)
        return True
    if mode == "json-lines":
        print_json_lines(rows if rows is not None else [obj])
        return True
    return False


def frame_table(title: str, df: Any, columns: Sequence[str] | None = None) -> None:
    cols = list(columns or df.columns)
    table(title, cols, df[cols].itertuples(index=False))


def ms_to_iso(ms: int) -> str:
    """Epoch ms as an ISO-8601 UTC string ("" for 0 or negative)."""
    import datetime as _dt

    if not ms or ms <= 0:
        return ""
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).isoformat(timespec="milliseconds")
