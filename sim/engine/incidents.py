"""A replica's incident log (kept only when asked for): one row per failure that struck,
of every class and scope, in the order they struck.

Each row: `time_h` (wall-clock hours since the replica's start when it struck), `node`
(the physical node id, stable across spares and repairs; -1 for a failure of no node),
`class`, `scope`, `lasting_fault` (whether the node had a lasting fault when it struck),
`repair_path` (the path drawn for the node: `repair` for a flat repair time; with the
repair pipeline `auto:fixed`, `auto:false_fix`, `auto>manual:fixed`,
`auto>manual:false_fix` or `rma`; `retired`; `misdiagnosed` when another node went
instead; empty when the node was not replaced) and `repair_hours` (hours from the failure
until the node was back in the spares or its pool; NaN for no node, a node not replaced
or retired). A node still in repair at the end gets the time its drawn path brings it
back. A leaf module: it imports nothing from the engine.
"""

from __future__ import annotations

import math

HOUR_S = 3600.0


class Incidents:
    """Lifecycle: `struck` when the router counts a failure; `left` when its node leaves
    for repair (or `stayed`); `returned` when a node is back; `close` at the end with the
    return times of the nodes still in repair."""

    __slots__ = ("rows", "_of", "_waiting")

    def __init__(self):
        self.rows: list[dict] = []
        # id(failure) -> (failure, its row, when it struck in s)
        self._of: dict[int, tuple[object, dict, float]] = {}
        # nodes in repair: (their path, the rows waiting for their return, with their times)
        self._waiting: dict[int, tuple[str, list[tuple[dict, float]]]] = {}

    def struck(self, failure, node: int, lasting: bool) -> None:
        row = {
            "time_h": failure.time_s / HOUR_S,
            "node": node,
            "class": failure.name,
            "scope": failure.scope,
            "repair_hours": math.nan,
            "lasting_fault": lasting,
            "repair_path": "",
        }
        self.rows.append(row)
        # the failure is kept: its id stays unique
        self._of[id(failure)] = (failure, row, failure.time_s)

    def alias(self, later, failure) -> None:
        """`later` is `failure` found (a silent corruption): the same row."""
        entry = self._of.get(id(failure))
        if entry is not None:
            self._of[id(later)] = (later, entry[1], entry[2])

    def _entry(self, failure, node: int) -> tuple[object, dict, float] | None:
        entry = self._of.get(id(failure))
        if entry is None or entry[1]["node"] != node or entry[1]["repair_path"]:
            return None
        return entry

    def left(self, failure, node: int, path: str) -> None:
        """The struck node left for repair along `path` (or retired)."""
        entry = self._entry(failure, node)
        if entry is None:
            return
        entry[1]["repair_path"] = path
        if path != "retired":
            self._waiting.setdefault(node, (path, []))[1].append((entry[1], entry[2]))

    def merged(self, failure) -> None:
        """A failure of a node that had already left (two failures merged): it waits for
        the same return."""
        entry = self._of.get(id(failure))
        if entry is None:
            return
        row = entry[1]
        waiting = self._waiting.get(row["node"])
        if waiting is not None and not row["repair_path"]:
            row["repair_path"] = waiting[0]
            waiting[1].append((row, entry[2]))

    def stayed(self, failure, node: int, why: str) -> None:
        entry = self._entry(failure, node)
        if entry is not None:
            entry[1]["repair_path"] = why

    def returned(self, node: int, when_s: float) -> None:
        waiting = self._waiting.pop(node, None)
        if waiting is not None:
            for row, struck_s in waiting[1]:
                row["repair_hours"] = (when_s - struck_s) / HOUR_S

    def close(self, returns_s: dict[int, float]) -> list[dict]:
        """The rows, with the return times of the nodes still in repair at the end."""
        for node, when_s in returns_s.items():
            self.returned(node, when_s)
        self._of.clear()
        return self.rows
