"""Which Nsight Systems exports of a folder are ranks of one run, from their metadata alone.

A Kineto trace says its rank and world size (``distributedInfo``); an Nsight export does not,
but its metadata tells ranks of one job from unrelated captures:

- the launched command (``META_DATA_CAPTURE`` ``PROCESS_0:COMMAND`` and ``ARGUMENT_<i>``): the
  ranks of ``srun nsys profile python train.py`` all ran the same command;
- the session start (``TARGET_INFO_SESSION_START_TIME.utcEpochNs``): they started together;
- the rank itself where the environment was captured (``PROCESS_<i>:ENVIRONMENT_VARIABLE``
  rows ``RANK=3``, ``OMPI_COMM_WORLD_RANK``, ``SLURM_PROCID``, ``PMI_RANK``; only these names
  are read, never other variables), and the host (``TARGET_INFO_SYSTEM_ENV`` ``Hostname``).

Exports of one folder with the same command whose sessions start within
``SAME_RUN_WINDOW_NS`` of the group's first are one run; their ranks are the captured ones,
else their order by session start, host and path (``rank_source = "session_order"``). An export
without a command (schema 2.x has no ``META_DATA_CAPTURE``) or alone in its group is left to
the default rules (:mod:`.task`). Only local ``.sqlite`` files are read, read-only, a few small
tables each; anything unreadable has no identity and the task reports the file's own error.
"""
from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

SAME_RUN_WINDOW_NS = 120 * 10**9  # ranks of one job start within seconds; two nightly runs do not
SQLITE_MAGIC = b"SQLite format 3\x00"
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "PMIX_RANK")
SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE")
_VARIABLE = re.compile(r"^(%s)=(\d{1,9})$" % "|".join(RANK_VARIABLES + SIZE_VARIABLES))
_ARGUMENT = re.compile(r"^PROCESS_0:ARGUMENT_(\d+)$")


@dataclass(frozen=True)
class NsysIdentity:
    """What an export says about the job it captured (None where it does not say)."""

    path: str
    command: str | None
    session_start_ns: int | None
    host: str | None
    rank: int | None
    world_size: int | None


@dataclass(frozen=True)
class RankHint:
    """The run and rank a group of exports gives one of them."""

    run_group: str  # "" : the default rules decide
    rank: int | None = None
    rank_source: str = ""
    world_size: int | None = None


def read_identity(path: str) -> NsysIdentity | None:
    """The identity of a local Nsight SQLite export; None when it is not one or cannot be read."""
    try:
        with open(path, "rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                return None
        con = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
    except (OSError, sqlite3.Error, ValueError):
        return None
    try:
        return _identity(con, path)
    except (sqlite3.Error, ValueError, TypeError, OverflowError):
        return None
    finally:
        con.close()


def _identity(con: sqlite3.Connection, path: str) -> NsysIdentity:
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    capture = _capture_rows(con) if "META_DATA_CAPTURE" in tables else []
    variables = dict(m.groups() for _, v in capture if (m := _VARIABLE.match(str(v))))
    return NsysIdentity(path, _command(capture), _session_start(con, tables), _host(con, tables),
                        _first_int(variables, RANK_VARIABLES), _first_int(variables, SIZE_VARIABLES))


def _capture_rows(con: sqlite3.Connection) -> list[tuple]:
    # Only the launch and the environment rows: a capture holds a few hundred rows at most.
    return con.execute("SELECT name, value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_0:%' "
                       "OR name LIKE 'PROCESS_%ENVIRONMENT%' LIMIT 100000").fetchall()


def _command(capture: list[tuple]) -> str | None:
    command = next((str(v) for n, v in capture if n == "PROCESS_0:COMMAND" and v), None)
    if command is None:
        return None
    args = sorted((int(m.group(1)), str(v)) for n, v in capture if (m := _ARGUMENT.match(str(n))))
    return "\x1f".join([command, *(a for _, a in args)])


def _session_start(con: sqlite3.Connection, tables: set) -> int | None:
    if "TARGET_INFO_SESSION_START_TIME" not in tables:
        return None
    row = con.execute("SELECT CAST(utcEpochNs AS INTEGER) FROM TARGET_INFO_SESSION_START_TIME "
                      "WHERE utcEpochNs IS NOT NULL LIMIT 1").fetchone()
    return row[0] if row and isinstance(row[0], int) else None


def _host(con: sqlite3.Connection, tables: set) -> str | None:
    if "TARGET_INFO_SYSTEM_ENV" not in tables:
        return None
    row = con.execute("SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = 'Hostname' LIMIT 1").fetchone()
    return str(row[0]) if row and row[0] is not None else None


def _first_int(variables: dict, names: tuple) -> int | None:
    return next((int(variables[n]) for n in names if n in variables), None)


def group_ranks(paths: list[str], folders: list[str]) -> dict[int, RankHint]:
    """``{position in paths: hint}`` for the Nsight exports that are ranks of one run.

    Args:
        paths: the inputs (only local ``.sqlite`` files are looked at).
        folders: the run key of each input's folder (``many.run_folders``).
    """
    identities = {i: read_identity(p) for i, p in enumerate(paths)
                  if p.endswith(".sqlite") and "://" not in p}
    hints: dict[int, RankHint] = {}
    by_folder: dict[str, list[int]] = {}
    for i, ident in identities.items():
        if ident is not None and ident.command is not None and ident.session_start_ns is not None:
            by_folder.setdefault(folders[i], []).append(i)
    for folder, members in by_folder.items():
        for group in _runs_of(members, identities):
            hints.update(_hints(group, identities, folder, whole=len(group) == _in_folder(folders, folder)))
    for i, ident in identities.items():  # not grouped, but the environment says its rank
        if i not in hints and ident is not None and ident.rank is not None:
            hints[i] = RankHint("", ident.rank, "nsys_env", ident.world_size)
    return hints


def _in_folder(folders: list[str], folder: str) -> int:
    return sum(f == folder for f in folders)


def _runs_of(members: list[int], identities: dict) -> list[list[int]]:
    """Groups of one command whose sessions start within the window of the group's first."""
    order = sorted(members, key=lambda i: (identities[i].command, identities[i].session_start_ns))
    groups: list[list[int]] = []
    for i in order:
        first = identities[groups[-1][0]] if groups else None
        ident = identities[i]
        if first and first.command == ident.command and \
                ident.session_start_ns - first.session_start_ns <= SAME_RUN_WINDOW_NS:
            groups[-1].append(i)
        else:
            groups.append([i])
    return [g for g in groups if len(g) > 1]


def _hints(group: list[int], identities: dict, folder: str, whole: bool) -> dict[int, RankHint]:
    """Run key (the folder's when the group is all of it) and ranks of one group."""
    order = sorted(group, key=lambda i: (identities[i].session_start_ns, identities[i].host or "",
                                         identities[i].path))
    run = folder if whole else f"{folder}.{Path(identities[order[0]].path).stem}"
    captured = [identities[i].rank for i in order]
    use_captured = None not in captured and len(set(captured)) == len(captured)
    sizes = {identities[i].world_size for i in order} - {None}
    size = sizes.pop() if len(sizes) == 1 else None
    return {i: RankHint(run, identities[i].rank if use_captured else pos,
                        "nsys_env" if use_captured else "session_order", size)
            for pos, i in enumerate(order)}
