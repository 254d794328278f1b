"""Specs: what a user declares about a model's inputs and its configuration.

Specs are frozen dataclasses built through `from_dict` constructors that collect every
problem before raising one `ConfigError`.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Iterable, Literal, Mapping

from .errors import ConfigError
from .storage import filesystem
from .types import parse_duration

JoinStrategy = Literal["auto", "binary", "multi"]
MissingRetractionPolicy = Literal["fail", "ignore"]
PlanChangePolicy = Literal["rebuild", "fail", "full_refresh"]
PLAN_CHANGE_POLICIES = ("rebuild", "fail", "full_refresh")
ChangelogFormat = Literal["changelog", "append", "cdf", "debezium", "upsert"]
FORMATS: tuple[str, ...] = ("changelog", "append", "cdf", "debezium", "upsert")
#: Formats whose changes may all be insertions (checked per run); the others update rows by design.
APPEND_FORMATS: tuple[str, ...] = ("append", "changelog", "cdf")
#: The column holding (or, once read, carrying) each format's row kind or operation.
DEFAULT_OP_COLUMNS = {"changelog": "_row_kind", "debezium": "op", "cdf": "_change_type"}

ROW_KIND_COLUMN = "_row_kind"
RUN_ID_COLUMN = "_run_id"
#: The keys of an input's declaration (`InputSpec.from_dict`).
INPUT_KEYS = ("columns", "unique_key", "event_time", "watermark_delay", "location", "changelog_format", "op_column",
              "delete_column", "sequence_column", "proc_time", "storage_options")


def unknown_keys(raw: Iterable[str], known: Iterable[str], *, where: str = "", noun: str = "key") -> list[str]:
    """A problem for each key of `raw` not in `known`, naming the closest known key when one is near.

    >>> unknown_keys(["changelog_fromat", "location"], INPUT_KEYS, where="input 'orders'")
    ["input 'orders': unknown key 'changelog_fromat': did you mean 'changelog_format'?"]
    """
    known = list(known)
    head = f"{where}: " if where else ""
    problems = []
    for key in raw:
        if key in known:
            continue
        near = closest_key(key, known)
        hint = f"did you mean '{near}'?" if near else f"known: {', '.join(known)}"
        problems.append(f"{head}unknown {noun} '{key}': {hint}")
    return problems


def closest_key(key: str, known: Iterable[str]) -> str | None:
    """The known key that `key` most likely misspells, if any is close."""
    near = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
    return near[0] if near else None


@dataclass(frozen=True)
class Column:
    """A named, typed column; `type` is a Spark SQL type name such as `bigint` or `decimal(10,2)`."""

    name: str
    type: str


@dataclass(frozen=True)
class InputSpec:
    """How one input of a model is declared: its columns, keys and event time.

    `location` is where its changelog lives (a Delta table path); `changelog_format` says how
    rows carry their row kind: `changelog` (a row kind column), `append` (insert-only events),
    `cdf` (a Delta table's change data feed), `debezium` (`before`/`after`/`op` envelopes) or
    `upsert` (each row is the latest version of its `unique_key`; `delete_column` marks deletes,
    `sequence_column` orders versions of a key that arrive in one run). `proc_time` names a
    processing-time column the input does not hold (Flink's `PROCTIME()`): its value is the time
    of the run that reads the row, and lookup joins (`FOR SYSTEM_TIME AS OF` it) read by it.
    `storage_options` are delta-rs's options for reaching `location` (an object store's endpoint
    and credentials); a spec registers them for its location (`storage.filesystem.register`).
    """

    name: str
    columns: tuple[Column, ...]
    unique_key: tuple[str, ...] = ()
    event_time: str | None = None
    watermark_delay: timedelta = timedelta(0)
    location: str | None = None
    changelog_format: ChangelogFormat = "changelog"
    op_column: str = ROW_KIND_COLUMN
    delete_column: str | None = None
    sequence_column: str | None = None
    proc_time: str | None = None
    storage_options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.location and self.storage_options:
            filesystem.register(self.location, dict(self.storage_options))

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def as_queried(self) -> "InputSpec":
        """The input as its model's SQL sees it: with its processing-time column, if it declares one."""
        if self.proc_time is None:
            return self
        return replace(self, columns=self.columns + (Column(self.proc_time, "timestamp"),))

    def column_type(self, name: str) -> str:
        for c in self.columns:
            if c.name.lower() == name.lower():
                return c.type
        raise KeyError(name)

    @classmethod
    def from_dict(cls, name: str, raw: Mapping[str, Any], *, model: str | None = None) -> "InputSpec":
        """Build from a declaration such as a conformance case's `inputs` entry or dbt YAML."""
        problems = unknown_keys(raw, INPUT_KEYS, where=f"input '{name}'")
        columns: list[Column] = []
        for item in raw.get("columns") or []:
            if isinstance(item, Mapping):
                columns.append(Column(str(item["name"]), str(item.get("type", item.get("data_type")))))
            else:
                columns.append(Column(str(item[0]), str(item[1])))
        if not columns:
            problems.append(f"input '{name}': declare its columns")
        names = {c.name.lower() for c in columns}
        if len(names) != len(columns):
            problems.append(f"input '{name}': column names repeat")
        unique_key = tuple(raw.get("unique_key") or ())
        if isinstance(raw.get("unique_key"), str):
            unique_key = (raw["unique_key"],)
        for col in unique_key:
            if col.lower() not in names:
                problems.append(f"input '{name}': unique_key column '{col}' is not one of its columns")
        event_time = raw.get("event_time")
        if event_time is not None and event_time.lower() not in names:
            problems.append(f"input '{name}': event_time column '{event_time}' is not one of its columns")
        try:
            delay = parse_duration(raw.get("watermark_delay"), what=f"input '{name}' watermark_delay")
        except ValueError as exc:
            problems.append(str(exc))
            delay = timedelta(0)
        fmt = raw.get("changelog_format", "changelog")
        if fmt not in FORMATS:
            problems.append(f"input '{name}': changelog_format '{fmt}' is not one of {', '.join(FORMATS)}")
        if fmt == "upsert" and not unique_key:
            problems.append(f"input '{name}': changelog_format 'upsert' needs a unique_key (the key each row upserts)")
        for key in ("delete_column", "sequence_column"):
            if raw.get(key) is not None and fmt != "upsert":
                problems.append(f"input '{name}': {key} only applies to changelog_format 'upsert', not '{fmt}'")
        if raw.get("op_column") is not None and fmt not in ("changelog", "debezium"):
            problems.append(f"input '{name}': op_column contradicts changelog_format '{fmt}', whose rows carry "
                            "no row kind column of their own; remove one of them")
        if raw.get("delete_column") is not None and str(raw["delete_column"]).lower() in names:
            problems.append(f"input '{name}': delete_column '{raw['delete_column']}' is a flag, not a data column; "
                            "leave it out of columns")
        sequence = raw.get("sequence_column")
        if sequence is not None and str(sequence).lower() not in names:
            problems.append(f"input '{name}': sequence_column '{sequence}' is not one of its columns")
        proc_time = raw.get("proc_time")
        if proc_time is not None and str(proc_time).lower() in names:
            problems.append(f"input '{name}': proc_time '{proc_time}' names a column the input holds; it declares a "
                            "column the run adds (the time of the run that reads a row), so leave it out of columns "
                            "or pick another name")
        options = raw.get("storage_options") or {}
        if not isinstance(options, Mapping) or not all(isinstance(v, (str, int, float, bool)) for v in options.values()):
            problems.append(f"input '{name}': storage_options must map option names to values, e.g. "
                            "{AWS_ENDPOINT_URL: 'http://127.0.0.1:9000', AWS_REGION: 'us-east-1'}")
            options = {}
        if problems:
            raise ConfigError(problems, model=model)
        return cls(
            name=name,
            columns=tuple(columns),
            unique_key=unique_key,
            event_time=event_time,
            watermark_delay=delay,
            location=raw.get("location"),
            changelog_format=fmt,
            op_column=raw.get("op_column") or DEFAULT_OP_COLUMNS.get(fmt, ROW_KIND_COLUMN),
            delete_column=raw.get("delete_column"),
            sequence_column=sequence,
            proc_time=proc_time,
            storage_options=tuple((str(k), str(v)) for k, v in options.items()),
        )


@dataclass(frozen=True)
class ModelConfig:
    """A streaming_join model's configuration (`config(...)` in dbt)."""

    join_strategy: JoinStrategy = "auto"
    state_ttl: timedelta | None = None
    allowed_lateness: timedelta = timedelta(0)
    on_missing_retraction: MissingRetractionPolicy = "fail"
    output_unique_key: tuple[str, ...] = ()
    state_buckets: int = 16
    #: when the SQL or configuration changed what the state depends on: rebuild the new state and
    #: outputs side by side from the inputs' history and swap them in (`rebuild`, see
    #: `runtime.rebuild`), refuse the run (`fail`), or drop the state and outputs and replay every
    #: input as `--full-refresh` does (`full_refresh`)
    on_plan_change: PlanChangePolicy = "rebuild"
    #: how many changes of each input a rebuild's run reads at most (None: all): a long rebuild then
    #: spans several runs, the old result serving until the swap
    rebuild_budget: int | None = None
    #: keep the result table's Delta change data feed: each run's change of the result as change
    #: data files (`_change_type` insert, update_preimage, update_postimage, delete) that CDF
    #: readers read (see `storage.change_data`)
    change_data_feed: bool = False

    KEYS = ("join_strategy", "state_ttl", "allowed_lateness", "on_missing_retraction",
            "output_unique_key", "state_buckets", "on_plan_change", "rebuild_budget", "change_data_feed")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None, *, model: str | None = None,
                  ignore: tuple[str, ...] = ()) -> "ModelConfig":
        """Validate a config mapping; unknown keys are errors (keys in `ignore` are skipped)."""
        raw = dict(raw or {})
        problems = unknown_keys([k for k in raw if k not in ignore], cls.KEYS, noun="config key")
        strategy = raw.get("join_strategy", "auto")
        if strategy not in ("auto", "binary", "multi"):
            problems.append(f"join_strategy '{strategy}' is not one of auto, binary, multi")
        policy = raw.get("on_missing_retraction", "ignore" if raw.get("state_ttl") else "fail")
        if policy not in ("fail", "ignore"):
            problems.append(f"on_missing_retraction '{policy}' is not one of fail, ignore")
        elif raw.get("state_ttl") and policy == "fail":
            problems.append("state_ttl drops idle rows, so later retractions of them cannot be matched: "
                            "use on_missing_retraction='ignore' with state_ttl (the default when state_ttl is set)")
        ttl = lateness = None
        try:
            ttl = parse_duration(raw["state_ttl"], what="state_ttl") if raw.get("state_ttl") else None
            lateness = parse_duration(raw.get("allowed_lateness"), what="allowed_lateness")
        except ValueError as exc:
            problems.append(str(exc))
        key = raw.get("output_unique_key") or ()
        key = (key,) if isinstance(key, str) else tuple(key)
        buckets = raw.get("state_buckets", 16)
        if not isinstance(buckets, int) or not 1 <= buckets <= 4096:
            problems.append(f"state_buckets {buckets!r} must be a whole number from 1 to 4096")
        on_plan_change = raw.get("on_plan_change", "rebuild")
        if on_plan_change not in PLAN_CHANGE_POLICIES:
            problems.append(f"on_plan_change '{on_plan_change}' is not one of {', '.join(PLAN_CHANGE_POLICIES)}")
        budget = raw.get("rebuild_budget")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            problems.append(f"rebuild_budget {budget!r} must be a whole number of changes, at least 1 (or left out: "
                            "a rebuild reads every input whole in one run)")
        feed = raw.get("change_data_feed", False)
        if not isinstance(feed, bool):
            problems.append(f"change_data_feed {feed!r} must be true or false")
        if problems:
            raise ConfigError(problems, model=model)
        return cls(
            join_strategy=strategy,
            state_ttl=ttl,
            allowed_lateness=lateness or timedelta(0),
            on_missing_retraction=policy,
            output_unique_key=key,
            state_buckets=buckets,
            on_plan_change=on_plan_change,
            rebuild_budget=budget,
            change_data_feed=feed,
        )
