"""CLI output: rich tables for people, JSON / JSON lines for scripts. One vocabulary for all."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = [
    "console", "emit", "frame_rows", "frame_table", "iter_frame_rows", "ms_to_iso", "print_json", "print_json_array",
    "print_json_lines", "table",
]

console = Console(highlight=False)


def _missing(v: Any) -> bool:
    """None, NaN, or pandas' NA (a nullable column's gap, whose ``!=`` has no truth value)."""
    return v is None or type(v).__name__ == "NAType" or (isinstance(v, float) and v != v)


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], caption: str | None = None) -> None:
    """A rich table that keeps offsets, ids and file names on one line when the terminal allows.

    Rich folds every cell evenly when a table is too wide, so a 32-character msgId or a
    20-digit file name ends up split over three lines. Columns whose cells hold no spaces
    (tokens) get their full width when all of them fit beside the other columns at their
    narrowest; only then do headers and prose fold. Wider than that, everything folds as before.
    """
    cells = [["" if _missing(v) else str(v) for v in row] for row in rows]
    widths = _token_widths(list(columns), cells, console.width)
    t = Table(title=title, title_justify="left", header_style="bold", caption=caption, caption_justify="left")
    for c, w in zip(columns, widths, strict=True):
        t.add_column(c, overflow="fold", width=w)
    for r in cells:
        t.add_row(*r)
    console.print(t)


_PROSE = 30  # the narrowest a column of sentences may get before every column folds instead


def _token_widths(columns: list[str], cells: list[list[str]], room: int) -> list[int | None]:
    """Fixed widths for token columns (None: let rich decide), or all None when they cannot fit.

    A token column is as wide as its widest cell; its header may fold, down to 6 characters
    when the room is short. Prose columns want their longest cell up to 30 characters to stay
    readable; short ones (a few keys) settle for their longest word up to 12 when that is all
    the room allows, sentences never (3 more per column: padding and border).
    """
    n = len(columns)
    token = [all(" " not in r[i] for r in cells) for i in range(n)]
    widest = [max((len(r[i]) for r in cells), default=0) for i in range(n)]
    natural = 1 + sum(3 + max(w, len(h)) for w, h in zip(widest, columns, strict=True))
    if natural <= room or not any(token):
        return [None] * n
    word = [max((len(x) for r in cells for x in r[i].split()), default=1) for i in range(n)]
    tries = [[min(w, _PROSE) for w in widest]]
    if all(tok or w <= _PROSE for tok, w in zip(token, widest, strict=True)):  # short lists, not sentences
        tries.append([min(w, 12) for w in word])
    for prose in tries:
        for cap in (16, 12, 10, 8, 6):
            fixed = [max(w, min(len(h), cap)) if tok else None
                     for w, h, tok in zip(widest, columns, token, strict=True)]
            need = 1 + sum(3 + (f if f is not None else p) for f, p in zip(fixed, prose, strict=True))
            if need <= room:
                return fixed
    return [None] * n


def _default(o: Any) -> Any:
    if isinstance(o, bytes | bytearray | memoryview):
        return bytes(o).hex()
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if hasattr(o, "__dict__"):
        return o.__dict__
    return str(o)


def _dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps`` whose text can be written as UTF-8: a file name with bytes that are not
    UTF-8 (Python lists them as lone surrogates) is shown with ``\\xff`` escapes."""
    text = json.dumps(obj, default=_default, ensure_ascii=False, **kw)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # rare: redo with every string made printable
        text = json.dumps(_printable(obj), default=_default, ensure_ascii=False, **kw)
    return text


def _printable(obj: Any) -> Any:
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return obj.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    if isinstance(obj, dict):
        return {_printable(k): _printable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_printable(v) for v in obj]
    return obj


def print_json(obj: Any) -> None:
    print(_dumps(obj, indent=2))


def print_json_lines(rows: Iterable[Any]) -> None:
    for row in rows:
        print(_dumps(row))


def print_json_array(rows: Iterable[Any]) -> int:
    """``print_json(list(rows))``, written row by row as ``rows`` yields them (a store's
    messages need not fit in memory); returns how many rows were written."""
    n = 0
    for row in rows:
        text = _dumps(row, indent=2).replace("\n", "\n  ")
        print(("[\n  " if n == 0 else ",\n  ") + text, end="")
        n += 1
    print("\n]" if n else "[]")
    return n


def frame_rows(df: Any) -> list[dict[str, Any]]:
    """DataFrame -> JSON-friendly dicts (NaN/NA -> None, numpy scalars -> Python)."""
    return list(iter_frame_rows(df))


def iter_frame_rows(df: Any, chunk: int = 8192) -> Iterator[dict[str, Any]]:
    """:func:`frame_rows` a chunk at a time: a queue of millions of units never becomes
    millions of dicts at once."""
    for start in range(0, len(df), chunk):
        for rec in df.iloc[start : start + chunk].to_dict(orient="records"):
            yield {k: _plain(v) for k, v in rec.items()}


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


def frame_table(title: str, df: Any, columns: Sequence[str] | None = None, caption: str | None = None) -> None:
    cols = list(columns or df.columns)
    table(title, cols, df[cols].itertuples(index=False), caption)


def ms_to_iso(ms: int) -> str:
    """Epoch ms as an ISO-8601 UTC string ("" for 0 or negative)."""
    import datetime as _dt

    if not ms or ms <= 0:
        return ""
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).isoformat(timespec="milliseconds")
