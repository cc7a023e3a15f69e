"""The export file: every table of a store as JSON Lines, exact integers, backend-neutral.

    {"format": "tradehall-export", "schemaVersion": 1}
    {"table": "users", "columns": ["id", "name", "created"]}
    [1, "alice", 1700000000000]
    ...                                   (every table of schema.TABLES, in that order)
    {"end": true, "rows": {"users": 1, ...}}

Rows are JSON arrays in the table's column order, sorted by primary key (text compared
bytewise), so the same state exports to the same bytes from SQLite and from PostgreSQL. JSON
integers are exact at any size. The last line lets an import tell a complete file from a
truncated one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from tradehall.store.base import StoreError
from tradehall.store.schema import TABLES, Table


class ExportFileError(StoreError):
    """The file given to an import is not a whole export of this schema: the caller's file,
    not the store, is at fault (the command line answers -1102, not a store failure)."""


FORMAT = "tradehall-export"
INT64 = (-(2**63), 2**63 - 1)

Row = tuple[Any, ...]


def _line(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False) + "\n"


def write(
    out: TextIO, version: int, tables: Iterable[tuple[Table, Iterable[Row]]]
) -> dict[str, int]:
    """Write the header, every table's rows and the end line; return the rows per table."""
    out.write(_line({"format": FORMAT, "schemaVersion": version}))
    counts: dict[str, int] = {}
    for table, rows in tables:
        out.write(_line({"table": table.name, "columns": list(table.columns)}))
        n = 0
        for row in rows:
            out.write(_line(list(row)))
            n += 1
        counts[table.name] = n
    out.write(_line({"end": True, "rows": counts}))
    return counts


class Reader:
    """Reads and checks an export file; ``tables()`` yields each table's rows lazily, so an
    import streams the file inside its transaction and a bad line aborts the whole import."""

    def __init__(self, source: TextIO) -> None:
        self._lines = enumerate(source, start=1)
        self._number = 0
        header = self._next_object()
        if header is None or header.get("format") != FORMAT:
            raise self._error("not a tradehall export (bad first line)")
        version = header.get("schemaVersion")
        if not isinstance(version, int) or isinstance(version, bool):
            raise self._error("the first line has no schemaVersion")
        self.version: int = version
        self.counts: dict[str, int] = {}

    def _error(self, problem: str) -> ExportFileError:
        return ExportFileError(f"export file line {self._number}: {problem}")

    def _next(self) -> Any:
        try:
            for number, text in self._lines:
                self._number = number
                if text.strip():
                    try:
                        return json.loads(text)
                    except ValueError as exc:
                        raise self._error(f"not JSON ({exc})") from None
        except UnicodeDecodeError:
            # Text is decoded in blocks: the bad byte is somewhere after the last line read.
            raise ExportFileError(
                f"export file after line {self._number}: not UTF-8 text"
            ) from None
        return None

    def _next_object(self) -> dict[str, Any] | None:
        value = self._next()
        if value is not None and not isinstance(value, dict):
            raise self._error("expected a table or end line")
        return value

    def tables(self) -> Iterator[tuple[Table, Iterator[Row]]]:
        pending = self._next()
        expected = list(TABLES.values())
        while True:
            if pending is None:
                raise self._error("the file ends without its end line (truncated?)")
            if not isinstance(pending, dict):
                raise self._error("expected a table or end line")
            if pending.get("end") is True:
                break
            if not expected:
                raise self._error("more tables than this schema has")
            table = expected.pop(0)
            if pending.get("table") != table.name:
                raise self._error(f"expected table {table.name!r}, got {pending.get('table')!r}")
            if pending.get("columns") != list(table.columns):
                raise self._error(f"the columns of {table.name!r} differ from this schema's")
            holder: list[Any] = []
            rows = self._rows(table, holder)
            yield table, rows
            for _ in rows:  # whatever the caller left unread
                pass
            pending = holder[0]
        if expected:
            raise self._error(f"table {expected[0].name!r} is missing")
        if pending.get("rows") != self.counts:
            raise self._error(f"the row counts {pending.get('rows')} differ from the rows read")
        if self._next() is not None:
            raise self._error("lines after the end line")

    def _rows(self, table: Table, holder: list[Any]) -> Iterator[Row]:
        """The rows of ``table``; the line that ends them is left in ``holder``."""
        width = len(table.columns)
        n = 0
        while True:
            value = self._next()
            if not isinstance(value, list):
                holder.append(value)
                self.counts[table.name] = n
                return
            if len(value) != width:
                raise self._error(f"{table.name} row has {len(value)} values, not {width}")
            for item in value:
                if isinstance(item, bool) or not isinstance(item, int | str | None):
                    raise self._error(f"{table.name} row holds {item!r}: only integers and text")
                if isinstance(item, int) and not INT64[0] <= item <= INT64[1]:
                    raise self._error(f"{table.name} row holds {item}, beyond 64-bit integers")
            n += 1
            yield tuple(value)
