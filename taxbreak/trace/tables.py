"""`TraceTables`: the five canonical tables plus metadata and diagnostics."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq

from .diagnostics import Diagnostics
from .fileio import atomic_output, output_target, write_output
from .schema import SCHEMAS, TABLE_NAMES, conform, empty_table

META_FILE = "trace_meta.json"


@dataclass
class TraceMeta:
    """What a trace says about itself.

    ``origin_ns`` is the absolute time (ns) of the trace's zero: Kineto's
    ``baseTimeNanoseconds`` or the first epoch timestamp of an old trace;
    Nsight's session start in UTC epoch ns when known. ``time_base`` says which
    (``kineto_relative`` | ``kineto_epoch_us`` | ``nsys_session``).
    ``event_counts`` is the accounting of input events: how many went to each
    table, to metadata, and to diagnostics (``dropped``); their sum equals
    ``input_events``.
    """

    source_format: str = ""  # "kineto" | "nsys"
    format_version: str = ""  # Kineto schemaVersion, Nsight EXPORT_SCHEMA_VERSION
    producer_version: str = ""  # Nsight product version, CUPTI version, ...
    path: str = ""
    origin_ns: int | None = None
    time_base: str = ""
    devices: list[dict] = field(default_factory=list)  # [{"id": 0, "name": "NVIDIA H100", ...}]
    process_names: dict[str, str] = field(default_factory=dict)  # str(pid) -> name
    thread_names: dict[str, str] = field(default_factory=dict)  # "pid:tid" -> name
    rank: int | None = None
    extra: dict = field(default_factory=dict)  # versions, distributedInfo, profiler flags
    input_events: int = 0
    event_counts: dict[str, int] = field(default_factory=dict)

    @property
    def device_names(self) -> list[str]:
        return [str(d.get("name", "")) for d in self.devices if d.get("name")]


@dataclass
class TraceTables:
    """The canonical tables of one trace. Every table has the schema in
    :mod:`taxbreak.trace.schema`; times are int64 ns from the trace origin."""

    host_events: pa.Table = field(default_factory=lambda: empty_table("host_events"))
    api_calls: pa.Table = field(default_factory=lambda: empty_table("api_calls"))
    device_activities: pa.Table = field(default_factory=lambda: empty_table("device_activities"))
    ranges: pa.Table = field(default_factory=lambda: empty_table("ranges"))
    flows: pa.Table = field(default_factory=lambda: empty_table("flows"))
    meta: TraceMeta = field(default_factory=TraceMeta)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)

    def table(self, name: str) -> pa.Table:
        return getattr(self, name)

    def counts(self) -> dict[str, int]:
        return {name: self.table(name).num_rows for name in TABLE_NAMES}

    def validate(self) -> None:
        """Conform every table to its canonical schema (raises KeyError on a missing column)."""
        for name in TABLE_NAMES:
            setattr(self, name, conform(name, self.table(name)))

    def to_parquet(self, out_dir: str | Path) -> list[Path]:
        """Write one Parquet file per table plus ``trace_meta.json``."""
        return write_parquet({name: self.table(name) for name in TABLE_NAMES}, self.meta_json(), out_dir)

    def meta_json(self) -> str:
        """The text of ``trace_meta.json``: the metadata and diagnostics, without the tables."""
        meta = {"meta": asdict(self.meta), "diagnostics": self.diagnostics.as_dict()}
        return json.dumps(meta, indent=1, sort_keys=True)

    @classmethod
    def from_parquet(cls, in_dir: str | Path) -> "TraceTables":
        """Read tables written by :meth:`to_parquet`."""
        src = Path(in_dir)
        tables = {
            name: conform(name, pq.read_table(src / f"{name}.parquet", schema=SCHEMAS[name]))
            for name in TABLE_NAMES
        }
        meta, diags = read_meta(src)
        return cls(**tables, meta=meta, diagnostics=diags)


    @classmethod
    def from_arrow(cls, in_dir: str | Path) -> "TraceTables":
        """Read tables written by :func:`write_arrow` (the parse cache's layout)."""
        src = Path(in_dir)
        tables = {name: conform(name, feather.read_table(src / f"{name}.arrow")) for name in TABLE_NAMES}
        meta, diags = read_meta(src)
        return cls(**tables, meta=meta, diagnostics=diags)


def write_arrow(tables: dict[str, pa.Table], meta_json: str, out_dir: str | Path) -> list[Path]:
    """One Arrow IPC file (LZ4) per table plus ``trace_meta.json``: the parse cache's layout.

    Not Parquet: at 1 M events the five tables take 0.08 s of CPU to write and
    0.06 s to read back as LZ4 IPC, against 0.25 s and 0.64 s as zstd Parquet
    (files 19 MB against 8 MB; docs/performance.md, "Cache writes"). Each table is
    taken out of ``tables`` as it is written, as in :func:`write_parquet`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in TABLE_NAMES:
        written.append(out / f"{name}.arrow")
        feather.write_feather(tables.pop(name), written[-1], compression="lz4")
    (out / META_FILE).write_text(meta_json)
    return written + [out / META_FILE]


def write_parquet(tables: dict[str, pa.Table], meta_json: str, out_dir: str | Path) -> list[Path]:
    """One Parquet file per table plus ``trace_meta.json`` (the layout :meth:`TraceTables.from_parquet` reads).

    Each table is taken out of ``tables`` as it is written: a caller that hands
    over the only references (the parse cache's background write) frees each
    table as soon as it is on disk instead of holding all five until the end.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in [f"{name}.parquet" for name in TABLE_NAMES] + [META_FILE]:
        output_target(out / name)  # a link among them refuses the whole output before any file is written
    # two tables at a time: the Parquet encoder runs on one core per file (10 M events: 3.4 s → ~2 s)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="taxbreak-parquet") as pool:
        jobs = [pool.submit(_write_table, tables.pop(name), out / f"{name}.parquet") for name in TABLE_NAMES]
        written = [job.result() for job in jobs]
    write_output(out / META_FILE, meta_json)
    return written + [out / META_FILE]


def _write_table(table: pa.Table, path: Path) -> Path:
    """One table as Parquet, dictionary pages for its text columns only.

    Parquet tries a dictionary for every column by default and gives it up for
    near-unique ones (ids, times) only after building it: text columns alone
    write the 10 M-event tables in 3.4 s instead of 4.8 s, and smaller (78 MB
    against 85 MB).
    """
    text = [f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_dictionary(f.type)]
    with atomic_output(path) as tmp:  # never through a link, never half a file (docs/reliability.md)
        pq.write_table(table, tmp, compression="zstd", use_dictionary=text)
    return path


def read_meta(in_dir: Path) -> tuple[TraceMeta, Diagnostics]:
    """The metadata and diagnostics saved by :func:`write_parquet` or :func:`write_arrow`."""
    saved = json.loads((Path(in_dir) / META_FILE).read_text())
    return TraceMeta(**saved["meta"]), Diagnostics.from_dict(saved.get("diagnostics", {}))


class DeferredTraceTables(TraceTables):
    """:class:`TraceTables` whose five tables are read on first access.

    ``meta`` and ``diagnostics`` are there at once. The analysis cache hands
    this out on a hit: a report needs only the metadata, and reading the
    tables back costs more than the rest of a cached ``analyze`` (0.45 s of
    ~1.2 s at 1 M events); a notebook that touches a table gets it, loaded once.
    """

    def __init__(self, meta: TraceMeta, diagnostics: Diagnostics, load: Callable[[], TraceTables]) -> None:
        self.meta = meta
        self.diagnostics = diagnostics
        self._load = load
        self._loaded: TraceTables | None = None

    def __getattr__(self, name: str):
        # called only when normal lookup fails: the table fields are never set on this object
        if name not in TABLE_NAMES:
            raise AttributeError(name)
        if self._loaded is None:
            self._loaded = self._load()
        return getattr(self._loaded, name)
