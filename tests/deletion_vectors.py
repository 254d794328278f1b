"""Deletion vectors as engines that delete rows without rewriting files commit them (Databricks, Delta
Lake 3 with `delta.enableDeletionVectors`): delta-rs writes none, so the tests commit them by hand,
inline in the log, as Delta's protocol defines them (a Z85 text of the magic number and a portable
64-bit Roaring bitmap of the deleted row positions)."""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any, Iterable

from deltalake import DeltaTable

MAGIC = 1681511377
Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
FEATURE = "deletionVectors"


def z85(data: bytes) -> str:
    """ZeroMQ's Base85 of `data`, zero-padded to whole 4-byte words (as Delta encodes inline vectors)."""
    data += b"\0" * (-len(data) % 4)
    out = []
    for (word,) in struct.iter_unpack(">I", data):
        out += [Z85[word // 85 ** i % 85] for i in range(4, -1, -1)]
    return "".join(out)


def roaring64(positions: Iterable[int]) -> bytes:
    """The portable serialization of a 64-bit Roaring bitmap (array and bitmap containers, no runs)."""
    by_high: dict[int, list[int]] = {}
    for p in sorted(set(positions)):
        by_high.setdefault(p >> 32, []).append(p & 0xFFFFFFFF)
    out = struct.pack("<Q", len(by_high))
    for high, lows in sorted(by_high.items()):
        out += struct.pack("<I", high) + _roaring32(lows)
    return out


def _roaring32(values: list[int]) -> bytes:
    containers: dict[int, list[int]] = {}
    for v in values:
        containers.setdefault(v >> 16, []).append(v & 0xFFFF)
    head = struct.pack("<II", 12346, len(containers))  # the cookie of a bitmap without run containers
    head += b"".join(struct.pack("<HH", key, len(lows) - 1) for key, lows in sorted(containers.items()))
    bodies = []
    for _, lows in sorted(containers.items()):
        if len(lows) <= 4096:
            bodies.append(struct.pack(f"<{len(lows)}H", *lows))
        else:
            words = [0] * 1024
            for low in lows:
                words[low >> 6] |= 1 << (low & 63)
            bodies.append(struct.pack("<1024Q", *words))
    offset = len(head) + 4 * len(containers)
    offsets = []
    for body in bodies:
        offsets.append(offset)
        offset += len(body)
    return head + struct.pack(f"<{len(offsets)}I", *offsets) + b"".join(bodies)


def inline_vector(positions: Iterable[int]) -> dict[str, Any]:
    """An add action's `deletionVector` that deletes the rows at `positions` of its file."""
    chosen = sorted(set(positions))
    data = struct.pack("<I", MAGIC) + roaring64(chosen)
    return {"storageType": "i", "pathOrInlineDv": z85(data), "sizeInBytes": len(data), "cardinality": len(chosen)}


def delete_rows(path: str | Path, positions: dict[str, Iterable[int]]) -> int:
    """Commit the deletion of the rows at `positions` of the named data files (by their path in the log,
    each set the file's whole vector after this commit), enabling deletion vectors first if the table
    has none. Returns the version committed."""
    dt = DeltaTable(str(path))
    log = Path(path) / "_delta_log"
    actions: list[dict[str, Any]] = []
    if FEATURE not in (dt.protocol().reader_features or []):
        actions += _enable(log)
    live = {a["path"]: a for a in _live_adds(log)}
    now = int(time.time() * 1000)
    for file, rows in positions.items():
        old = live[file]
        actions.append({"remove": {k: v for k, v in old.items() if k in ("path", "partitionValues", "size",
                                                                          "deletionVector")}
                        | {"deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True}})
        actions.append({"add": {**old, "dataChange": True, "deletionVector": inline_vector(rows)}})
    actions.append({"commitInfo": {"timestamp": now, "operation": "DELETE", "engineInfo": "streamjoin tests"}})
    version = dt.version() + 1
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return version


def _commits(log: Path) -> list[list[dict[str, Any]]]:
    return [[json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            for f in sorted(log.glob("*.json"))]


def _live_adds(log: Path) -> list[dict[str, Any]]:
    """The add actions of the table's live files (a log without checkpoints)."""
    live: dict[str, dict[str, Any]] = {}
    for commit in _commits(log):
        for action in commit:
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return list(live.values())


def _enable(log: Path) -> list[dict[str, Any]]:
    """The protocol and metadata actions that turn deletion vectors on (reader 3, writer 7)."""
    metadata = [a["metaData"] for commit in _commits(log) for a in commit if "metaData" in a][-1]
    config = {**(metadata.get("configuration") or {}), "delta.enableDeletionVectors": "true"}
    return [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [FEATURE],
                          "writerFeatures": ["appendOnly", "invariants", FEATURE]}},
            {"metaData": {**metadata, "configuration": config}}]
