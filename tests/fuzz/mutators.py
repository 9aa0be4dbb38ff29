"""Structure-aware mutators for the two trace formats.

Each mutator takes a ``random.Random`` and a base trace and returns the bytes
of one case plus a file suffix. Kineto mutators edit the parsed JSON and write
it back with :func:`dump`, which can emit raw number text (``1e-9999999``),
duplicate keys and nesting of any depth without building them in Python. Nsight
mutators copy a base export and change it with SQL (storage classes, schema,
views, missing tables) or damage its bytes.

Mutator classes are grouped by the bug class they probe; :data:`PENDING` names
those whose fixes are not in place yet (the in-suite run leaves them out).
"""
from __future__ import annotations

import copy
import gzip
import json
import random
import sqlite3
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# --- Kineto JSON -----------------------------------------------------------------------


class Raw(str):
    """JSON text written as is (a number literal, a nested blob)."""


class Pairs(list):
    """An object as a list of (key, value) pairs: keys may repeat."""


def dump(value) -> str:
    """JSON text of ``value`` with :class:`Raw` and :class:`Pairs` honoured."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in value) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump(v) for v in value) + "]"
    return json.dumps(value)


NUMERIC_FIELDS = ("ts", "dur", "pid", "tid")
NUMERIC_ARGS = ("correlation", "External id", "stream", "device", "grid", "block", "Record function id")
EXTREME_NUMBERS = (
    "1e-9999999", "1e999990", "1e999999999", "-1e999999999", "9e15", "-9e15", "9223372036854775807",
    "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e308", "-1e308", "1e309",
    "4.9e-324", "-0", "0.000000001", "123456789012345678901234567890", "1" * 5000, "1." + "0" * 5000 + "1",
    "1e+0000000000000000000000010", "-0.0e-0", '"0xffffffffffffffffffffffff"', '"-99999999999999999999999"',
)
OTHER_TYPES = ('"12"', '"0x1f"', "null", "true", "[]", "{}", "[1, 2]", '{"a": 1}', '""')
ODD_STRINGS = ("\u0000", "\u001b]52;c;aGk=\u0007", "\u202e", "\ud800", "\udfff", "x" * 100_000, "", "\uffff",
               "[bold]x[/bold]", "\u0085\u2028")


def _events(doc: dict) -> list[dict]:
    return [e for e in doc.get("traceEvents", []) if isinstance(e, dict)]


def _field_target(rng: random.Random, doc: dict) -> tuple[dict, str]:
    """A random event and one of its numeric fields (top level or in args)."""
    event = rng.choice(_events(doc))
    if rng.random() < 0.5 or not isinstance(event.get("args"), dict):
        return event, rng.choice(NUMERIC_FIELDS)
    return event["args"], rng.choice(NUMERIC_ARGS)


def k_number(rng: random.Random, doc: dict) -> bytes:
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        target, key = _field_target(rng, doc)
        target[key] = Raw(rng.choice(EXTREME_NUMBERS))
    return dump(doc).encode()


def k_type(rng: random.Random, doc: dict) -> bytes:
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 4)):
        event = rng.choice(_events(doc))
        key = rng.choice(list(event) + ["args", "name", "cat", "ph"])
        event[key] = Raw(rng.choice(OTHER_TYPES))
    return dump(doc).encode()


def k_string(rng: random.Random, doc: dict) -> bytes:
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 4)):
        event = rng.choice(_events(doc))
        event[rng.choice(("name", "cat"))] = event.get("name", "") + rng.choice(ODD_STRINGS)
    text = dump(doc).encode("utf-8", "surrogatepass")  # a lone surrogate escape becomes WTF-8 bytes
    if rng.random() < 0.3:  # invalid UTF-8 somewhere in a name
        at = text.find(b'"name":"') + 8
        text = text[:at] + rng.choice((b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xf4\x90\x80\x80")) + text[at:]
    return text


def k_nesting(rng: random.Random, doc: dict) -> bytes:
    doc = copy.deepcopy(doc)
    depth = rng.choice((50, 999, 1000, 1001, 5000, 100_000))
    opener, closer = rng.choice((("[", "]"), ('{"a":', "}")))
    blob = Raw(opener * depth + "1" + closer * depth)
    where = rng.random()
    if where < 0.4:
        rng.choice(_events(doc)).setdefault("args", {})["deep"] = blob
    elif where < 0.7:
        doc["deep"] = blob
    else:
        doc["traceEvents"].append(blob)
    return dump(doc).encode()


def k_duplicate(rng: random.Random, doc: dict) -> bytes:
    events = doc["traceEvents"]
    half = len(events) // 2
    if rng.random() < 0.5:
        pairs = Pairs([(k, v) for k, v in doc.items() if k != "traceEvents"])
        pairs += [("traceEvents", events[:half]), ("traceEvents", events[half:])]
        return dump(pairs).encode()
    doc = copy.deepcopy(doc)
    i = rng.randrange(len(doc["traceEvents"]))
    event = doc["traceEvents"][i]
    key = rng.choice([k for k in event])
    doc["traceEvents"][i] = Pairs(list(event.items()) + [(key, Raw(rng.choice(OTHER_TYPES + ('"x"', "7"))))])
    return dump(doc).encode()


def k_structure(rng: random.Random, doc: dict) -> bytes:
    doc = copy.deepcopy(doc)
    choice = rng.randrange(6)
    if choice == 0:  # drop fields from events
        for event in rng.sample(_events(doc), k=min(5, len(_events(doc)))):
            event.pop(rng.choice(list(event)), None)
    elif choice == 1:
        return dump(doc["traceEvents"]).encode()  # a bare array
    elif choice == 2:
        doc["traceEvents"] = Raw(rng.choice(OTHER_TYPES))
    elif choice == 3:
        doc["traceEvents"] = rng.sample(doc["traceEvents"], len(doc["traceEvents"]))  # shuffled
    elif choice == 4:
        doc["traceEvents"] += [{"ph": rng.choice("XBEiMsftC"), "name": "n", "pid": 1, "tid": 1, "ts": 1}] * 3
    else:
        for key in ("deviceProperties", "baseTimeNanoseconds", "distributedInfo"):
            if key in doc:
                doc[key] = Raw(rng.choice(OTHER_TYPES))
    return dump(doc).encode()


def k_truncate(rng: random.Random, doc: dict) -> bytes:
    text = dump(doc).encode()
    return text[: rng.randrange(1, len(text))]


def k_gzip_framing(rng: random.Random, doc: dict) -> bytes:
    data = gzip.compress(dump(doc).encode(), mtime=0)
    choice = rng.randrange(6)
    if choice == 0:
        return data[: rng.randrange(2, len(data))]  # truncated stream
    if choice == 1:
        return data + data  # two members
    if choice == 2:
        return data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))  # trailing garbage
    if choice == 3:  # a flipped byte in the body, header or trailer
        pos = rng.choice((rng.randrange(10, len(data)), rng.randrange(0, 10), len(data) - rng.randint(1, 8)))
        return data[:pos] + bytes([data[pos] ^ (1 << rng.randrange(8))]) + data[pos + 1:]
    if choice == 4:
        return gzip.compress(data, mtime=0)  # gzip of a gzip
    return data[:3] + bytes([data[3] | 0x1F]) + data[4:]  # header flags that promise extra fields


_BOMBS: dict[bytes, bytes] = {}  # filler -> compressed bytes (4 s to make each)


def k_gzip_bomb(rng: random.Random, doc: dict) -> bytes:
    """Highly compressible content: 256 MiB of spaces or NULs behind a few hundred kB."""
    filler = rng.choice((b" ", b"\x00"))
    if filler not in _BOMBS:
        _BOMBS[filler] = _bomb(filler)
    return _BOMBS[filler]


def _bomb(filler: bytes) -> bytes:
    head, tail = (b'{"traceEvents":[', b"]}") if filler == b" " else (b"", b"")
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [comp.compress(head)]
    block = filler * (16 * 1024 * 1024)
    parts += [comp.compress(block) for _ in range(16)]
    parts += [comp.compress(tail), comp.flush()]
    return b"".join(parts)


# --- Nsight SQLite ---------------------------------------------------------------------

STORAGE_VALUES = ("'text'", "X'00FF'", "X''", "1e300", "-1e300", "0.5", "NULL", "9223372036854775807",
                  "-9223372036854775808", "'9999999999999999999999'", "zeroblob(100)", "printf('%.*c', 70000, 'x')")
ENDLESS_VIEW = ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
                "SELECT i AS id, i AS start, i AS end, i AS value, i AS name FROM r")


GENERATED = ("zeroblob(900000000)", "printf('%.*c', 60000000, 'x')", "1/0", "length(hex(randomblob(1000)))")


def _tables_of(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def _with_sql(base: bytes, edit: Callable[[sqlite3.Connection], None]) -> bytes:
    with tempfile.TemporaryDirectory(prefix="taxbreak-fuzz-") as tmp:
        path = Path(tmp) / "x.sqlite"
        path.write_bytes(base)
        con = sqlite3.connect(path)
        try:
            edit(con)
            con.commit()
        except sqlite3.Error:
            con.rollback()
        finally:
            con.close()
        return path.read_bytes()


def n_storage(rng: random.Random, base: bytes) -> bytes:
    def edit(con):
        for _ in range(rng.randint(1, 6)):
            table = rng.choice(_tables_of(con))
            column = rng.choice(_columns(con, table))
            # a column without type affinity keeps the storage class: recreate it without a type
            con.execute(f'UPDATE "{table}" SET "{column}" = {rng.choice(STORAGE_VALUES)} '
                        f"WHERE abs(random()) % 3 = 0")
        if rng.random() < 0.5:
            con.execute('ALTER TABLE StringIds RENAME TO s_old')
            con.execute("CREATE TABLE StringIds (id, value)")
            con.execute(f"INSERT INTO StringIds SELECT id, CASE WHEN abs(random()) % 2 THEN value ELSE "
                        f"{rng.choice(STORAGE_VALUES)} END FROM s_old")
    return _with_sql(base, edit)


def n_schema(rng: random.Random, base: bytes) -> bytes:
    def edit(con):
        table = rng.choice(_tables_of(con))
        choice = rng.randrange(5)
        if choice == 0:
            con.execute(f'DROP TABLE "{table}"')
        elif choice == 1:
            column = rng.choice(_columns(con, table))
            con.execute(f'ALTER TABLE "{table}" RENAME COLUMN "{column}" TO "{column}_x"')
        elif choice == 2:
            con.execute(f'ALTER TABLE "{table}" ADD COLUMN extra_{rng.randrange(99)} BLOB DEFAULT X\'00\'')
        elif choice == 3:  # a generated column under a name the reader reads
            column = rng.choice(_columns(con, table))
            con.execute(f'ALTER TABLE "{table}" RENAME TO t_old')
            cols = [c for c in _columns(con, "t_old") if c != column]
            spec = ", ".join(f'"{c}"' for c in cols)
            expression = rng.choice(GENERATED)
            con.execute(f'CREATE TABLE "{table}" ({spec}, "{column}" GENERATED ALWAYS AS ({expression}) VIRTUAL)')
            con.execute(f'INSERT INTO "{table}" ({spec}) SELECT {spec} FROM t_old')
        else:
            con.execute(f'CREATE TABLE "{table}_{rng.randrange(9)}" AS SELECT * FROM "{table}"')
    return _with_sql(base, edit)


def n_view(rng: random.Random, base: bytes) -> bytes:
    def edit(con):
        table = rng.choice(_tables_of(con))
        con.execute(f'DROP TABLE "{table}"')
        body = rng.choice((ENDLESS_VIEW, "SELECT zeroblob(1000000) AS value, 1 AS id",
                           f"SELECT * FROM sqlite_master"))
        con.execute(f'CREATE VIEW "{table}" AS {body}')
    return _with_sql(base, edit)


def n_bytes(rng: random.Random, base: bytes) -> bytes:
    data = bytearray(base)
    if rng.random() < 0.3:
        return bytes(data[: rng.randrange(1, len(data))])
    for _ in range(rng.randint(1, 30)):
        data[rng.randrange(100 if rng.random() < 0.9 else 0, len(data))] = rng.randrange(256)
    return bytes(data)


@dataclass(frozen=True)
class Mutator:
    name: str  # the bug class it probes
    fmt: str  # kineto | nsys
    fn: Callable
    suffix: str = ".json"


MUTATORS = (
    Mutator("kineto.number", "kineto", k_number),
    Mutator("kineto.type", "kineto", k_type),
    Mutator("kineto.string", "kineto", k_string),
    Mutator("kineto.nesting", "kineto", k_nesting),
    Mutator("kineto.duplicate_keys", "kineto", k_duplicate),
    Mutator("kineto.structure", "kineto", k_structure),
    Mutator("kineto.truncate", "kineto", k_truncate),
    Mutator("kineto.gzip_framing", "kineto", k_gzip_framing, ".json.gz"),
    Mutator("kineto.gzip_bomb", "kineto", k_gzip_bomb, ".json.gz"),
    Mutator("nsys.storage_class", "nsys", n_storage, ".sqlite"),
    Mutator("nsys.schema", "nsys", n_schema, ".sqlite"),
    Mutator("nsys.view", "nsys", n_view, ".sqlite"),
    Mutator("nsys.bytes", "nsys", n_bytes, ".sqlite"),
)

# Classes whose fixes are not in place yet (the in-suite run leaves them out): none.
PENDING: frozenset[str] = frozenset()


def base_traces(folder: Path) -> dict[str, object]:
    """The base cases: a small Kineto document (dict) and an Nsight export (bytes)."""
    from taxbreak.synth.bigtrace import write_big_kineto
    from taxbreak.synth.planted import build, random_spec
    from taxbreak.synth.write_nsys import write_nsys
    import numpy as np

    kineto = write_big_kineto(folder / "base.json", 400, gzip=False, layers=2, decode_steps=2).path
    planted = build(random_spec(np.random.default_rng(0), steps=2, ops=3))
    nsys = write_nsys(planted.tables, folder / "base.sqlite")
    return {"kineto": json.loads(kineto.read_text()), "nsys": nsys.read_bytes()}
