"""The fleet dataset: partitioned tables, a manifest of inputs, resumable reruns, one version.

``OUT`` (a path or fsspec URL) holds::

    OUT/_taxbreak_dataset.json                       {"dataset_format", "taxbreak_version"}
    OUT/{kernels,steps,phases,idle}/run=/rank=/phase=/part-<id>.parquet   (:mod:`.partition`)
    OUT/manifest/run=<id>/rank=<r>/part-<id>.parquet  one row per input trace, written last

``<id>`` names one input: a hash of its URL, its content fingerprint and the options that
change the result. A task writes its data files (each atomically), then its manifest row: the
row is the commit. Files without a manifest row are from a task that died and are removed at
the start and the end of every run, so readers of a finished run never see a partial partition.
A rerun over the same inputs skips every input with a row (resumable) and reads its summary
from there; a trace whose content changed gets a new id and its old files are removed.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.dataset as ds

from .. import __version__
from ..trace.errors import TaxbreakError
from .fsio import parquet_bytes, url_to_fs, write_bytes_atomic
from .partition import PARTITIONED_TABLES, partition_files, write_files

DATASET_FORMAT = 4  # bump when a table gains, loses or changes a column for the same input (2: idle table; 3: issued idle split by what was issued; 4: queue_wait_sum_us, tklqt_sum_us, device_span_idle_us renamed)
VERSION_FILE = "_taxbreak_dataset.json"
MANIFEST = "manifest"
MANIFEST_PARTITIONS = pa.schema([("run", pa.string()), ("rank", pa.int64())])
_PART_ID = re.compile(r"part-([0-9a-f]+)\.parquet$")


@dataclass(frozen=True)
class Dataset:
    """An open dataset root: the fsspec filesystem and the root path on it."""

    url: str
    fs: object
    root: str

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}"


def open_dataset(url: str) -> Dataset:
    """Open (and create) the dataset at ``url``, refusing one written by another taxbreak version.

    Raises:
        TaxbreakError: ``dataset.version_mismatch`` when ``url`` holds a dataset of another
            taxbreak version or dataset format, or files but no version stamp.
    """
    fs, root = url_to_fs(str(url))
    dataset = Dataset(str(url), fs, root.rstrip("/"))
    stamp = {"dataset_format": DATASET_FORMAT, "taxbreak_version": __version__}
    found = _read_stamp(dataset)
    if found is None:
        if any(fs.exists(dataset.path(t)) for t in (*PARTITIONED_TABLES, MANIFEST)):
            _refuse(dataset, "holds tables but no version stamp")
        fs.makedirs(dataset.root, exist_ok=True)
        write_bytes_atomic(fs, dataset.path(VERSION_FILE), json.dumps(stamp).encode())
    elif found != stamp:
        _refuse(dataset, f"was written by taxbreak {found.get('taxbreak_version')} (dataset format "
                         f"{found.get('dataset_format')}); this is taxbreak {__version__} (format {DATASET_FORMAT})")
    return dataset


def _read_stamp(dataset: Dataset) -> dict | None:
    try:
        return json.loads(dataset.fs.cat_file(dataset.path(VERSION_FILE)))
    except FileNotFoundError:
        return None
    except ValueError:
        return {}


def _refuse(dataset: Dataset, why: str) -> None:
    raise TaxbreakError("dataset.version_mismatch", f"the dataset {why}", path=dataset.url,
                        hint="write to a new -o folder (results of two versions are never mixed), "
                             "or remove this one to start over")


def input_id(url: str, fingerprint: str, options: dict) -> str:
    """The id of one input: its URL, content fingerprint and result-changing options."""
    text = json.dumps([url, fingerprint, options, DATASET_FORMAT, __version__], sort_keys=True)
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def committed(dataset: Dataset) -> dict[str, dict]:
    """``{input id: manifest row}`` of every committed input (run and rank included)."""
    if not dataset.fs.exists(dataset.path(MANIFEST)):
        return {}
    table = ds.dataset(dataset.path(MANIFEST), filesystem=dataset.fs, format="parquet",
                       partitioning=ds.partitioning(MANIFEST_PARTITIONS, flavor="hive")).to_table()
    return {row["input_id"]: row for row in table.to_pylist()}


def manifest_rel(run: str, rank: int, part_id: str) -> str:
    return f"{MANIFEST}/run={run}/rank={rank}/part-{part_id}.parquet"


def commit_task(dataset: Dataset, analysis, row: dict) -> list[str]:
    """Write one input's data files, then its manifest row (the commit). Returns the data files."""
    run, rank, part_id = row["run"], row["rank"], row["input_id"]
    files = write_files(dataset.fs, dataset.root, partition_files(analysis, run, rank, part_id))
    record = {k: v for k, v in row.items() if k not in ("run", "rank")} | {"files": json.dumps(files)}
    write_bytes_atomic(dataset.fs, dataset.path(manifest_rel(run, rank, part_id)),
                       parquet_bytes(pa.Table.from_pylist([record], schema=manifest_schema())))
    return files


def manifest_schema() -> pa.Schema:
    """Columns of a manifest row (``run`` and ``rank`` are in the path)."""
    return pa.schema([("input", pa.string()), ("input_id", pa.string()), ("fingerprint", pa.string()),
                      ("rank_source", pa.string()), ("source_format", pa.string()), ("world_size", pa.int64()),
                      ("taxbreak_version", pa.string()), ("dataset_format", pa.int64()),
                      ("summary", pa.string()), ("files", pa.string())])


def remove_input(dataset: Dataset, row: dict) -> None:
    """Remove a committed input: its manifest row first (so it is no longer done), then its files."""
    dataset.fs.rm(dataset.path(manifest_rel(row["run"], row["rank"], row["input_id"])))
    for rel in json.loads(row["files"]):
        if dataset.fs.exists(dataset.path(rel)):
            dataset.fs.rm(dataset.path(rel))


def sweep_uncommitted(dataset: Dataset, keep: set[str]) -> int:
    """Remove data files whose input has no manifest row (a task that died) and temporary files.

    Returns:
        How many files were removed.
    """
    removed = 0
    for table in PARTITIONED_TABLES:
        base = dataset.path(table)
        if not dataset.fs.exists(base):
            continue
        for path in dataset.fs.find(base):
            match = _PART_ID.search(path)
            if path.endswith(".partial") or (match and match.group(1) not in keep):
                dataset.fs.rm(path)
                removed += 1
    return removed
