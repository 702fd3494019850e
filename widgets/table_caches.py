"""Textual's `DataTable` keeps what it rendered (cells, rows, lines) in caches sized for big
tables: 10,000 cells, 1,000 rows and 1,000 lines, each entry keyed by the table's update
count, so an entry is never asked for again once a cell changed. The Channels and Leases
panes change a few cells every second: their caches filled for hours of use (in
bench/bench_soak.py, +10 MiB between the 500th and the 4,500th prompt, issue 40 §4). Our
tables show tens of rows, so each cache is bounded to a few screens of them.
"""

from __future__ import annotations

from typing import Any

from textual.cache import LRUCache
from textual.widgets import DataTable

# name of Textual's (private) cache → entries kept: a few screens of a table of tens of rows
RENDER_CACHES = {"_cell_render_cache": 600, "_row_render_cache": 120, "_line_cache": 240}


def bound_render_caches(table: DataTable[Any]) -> list[str]:
    """Bound `table`'s render caches; the names of those it has (a Textual that renamed one
    leaves it at its own size: `tests/widgets/test_table_caches.py` fails then)."""
    bounded = []
    for name, entries in RENDER_CACHES.items():
        cache = getattr(table, name, None)
        if isinstance(cache, LRUCache):
            cache.maxsize = entries
            bounded.append(name)
    return bounded
