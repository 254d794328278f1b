"""Who works on a model right now: a run or maintenance keeps a marker file in the model's folder.

Runs of one model may overlap (Delta's conflict check lets one commit), but maintenance rewrites
files under a run's feet, so each refuses to start while the other holds the model. A marker
whose process died on this host is stale and ignored. Markers live beside the model's tables,
wherever those are (`storage.filesystem`).
"""
from __future__ import annotations

import json
import os
import socket
import time
import uuid
from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import ModelBusyError
from ..processes import alive
from ..storage import filesystem
from ..storage.tables import ModelTables

FOLDER = "_active"


def holders(tables: ModelTables) -> list[dict[str, Any]]:
    """The live markers of a model (stale ones of dead local processes are removed)."""
    folder = filesystem.join(tables.home, FOLDER)
    out = []
    for name in filesystem.list_names(folder):
        path = filesystem.join(folder, name)
        try:
            marker = json.loads(filesystem.read_bytes(path))
        except (FileNotFoundError, json.JSONDecodeError):
            continue
        if marker.get("host") == socket.gethostname() and not alive(int(marker.get("pid", 0))):
            filesystem.delete_file(path)
            continue
        out.append(marker)
    return out


def describe(marker: dict[str, Any]) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(marker["started"]))
    return f"a {marker['what']} (pid {marker['pid']} on {marker['host']}, since {started})"


@contextmanager
def holding(tables: ModelTables, what: str, *, exclusive_of: tuple[str, ...]) -> Iterator[None]:
    """Hold the model for `what` ("run" or "maintain"); ModelBusyError if a holder of a kind in
    `exclusive_of` is at work."""
    folder = filesystem.join(tables.home, FOLDER)
    marker = {"what": what, "host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}
    path = filesystem.join(folder, f"{what}-{marker['pid']}-{uuid.uuid4().hex[:8]}.json")
    filesystem.write_bytes(path, json.dumps(marker).encode("utf-8"))
    try:
        busy = [m for m in holders(tables) if m["what"] in exclusive_of and m != marker]
        if busy:
            raise ModelBusyError(f"model '{tables.model}' is held by {describe(busy[0])}; try again when it is done "
                                 f"(if that process is gone, delete {filesystem.join(folder, '')}*)")
        yield
    finally:
        filesystem.delete_file(path)
