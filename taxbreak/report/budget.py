"""Overhead budgets: a TOML file of limits on summary metrics (docs/ci.md).

Format::

    allow_unmeasured = false        # optional; see below

    [all]                           # the whole trace
    hdbi = ">= 0.2"
    [decode]                        # one table per phase: prefill, decode, mixed (unknown)
    orchestration_us_per_token = "<= 900"

    [regression]                    # relative limits against --baseline, in percent
    max_pct = 5                     # every metric in ORCHESTRATION_METRICS
    orchestration_us_per_token = 3  # per-metric override (any metric with a direction)
    [regression.decode]             # optional overrides for one phase
    max_pct = 2

A limit on a metric that is ``None`` (not measured) fails with status
``not_measured`` unless ``allow_unmeasured = true`` (or ``--allow-unmeasured``),
which turns it into ``skipped``. Parsing raises :class:`BudgetError`
(``budget.malformed`` / ``budget.unknown_metric`` / ``budget.renamed_metric``,
an old name of a metric whose name now says it is a sum) naming the line and key;
limits must be finite (``nan`` or ``inf`` would make every comparison hold or
none), and a file nested past Python's recursion limit or larger than
``MAX_BUDGET_BYTES`` is ``budget.malformed`` too. A budget without any limit
parses; the check then says that it checks nothing (docs/ci.md).
"""
from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..trace.errors import BudgetError, TaxbreakError
from ..trace.fileio import read_input_bytes
from .metrics import METRIC_KEYS, ORCHESTRATION_METRICS, PHASES, RENAMED_METRICS, WORSE_DIRECTION

SCOPES = ("all",) + PHASES
TEXT_METRICS = ("floor_source",)
_COMPARISON = re.compile(r"^\s*(<=|>=|==|!=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
_TOML_LINE = re.compile(r"line (\d+), column (\d+)")
MAX_BUDGET_BYTES = 1024 * 1024  # a budget is a few dozen lines; bounds the parse of a hostile file


@dataclass(frozen=True)
class Limit:
    """An absolute limit: ``metric op threshold`` in one scope (``all`` or a phase)."""

    scope: str
    metric: str
    op: str
    threshold: float
    line: int | None = None

    @property
    def text(self) -> str:
        return f"{self.op} {self.threshold:g}"


@dataclass(frozen=True)
class RegressionLimit:
    """A relative limit: ``metric`` may get worse by at most ``max_pct`` % vs the baseline."""

    scope: str | None  # None = every scope compared
    metric: str  # a metric name, or "max_pct" for the orchestration default
    max_pct: float
    line: int | None = None


@dataclass
class Budget:
    limits: list[Limit] = field(default_factory=list)
    regression: list[RegressionLimit] = field(default_factory=list)
    allow_unmeasured: bool = False
    path: str | None = None

    @property
    def empty(self) -> bool:
        """No limit at all: checking it checks nothing."""
        return not self.limits and not self.regression


def load_budget(path: str | Path) -> Budget:
    """Read and validate a budget file.

    Raises:
        BudgetError: ``input.not_found``, ``input.unreadable`` (a FIFO, device or folder),
            ``input.too_large`` (over ``MAX_BUDGET_BYTES``), checked before the file is opened;
            ``budget.malformed`` for unreadable TOML or a bad limit,
            ``budget.unknown_metric`` for a name that is not a summary metric,
            ``budget.renamed_metric`` for a name in ``RENAMED_METRICS``.
    """
    p = Path(path)
    # stat before open: a FIFO would block, /dev/zero never end (input.unreadable, input.too_large)
    try:
        data = read_input_bytes(p, max_bytes=MAX_BUDGET_BYTES, what="budget")
    except TaxbreakError as err:  # its input code, with the budget's exit status (2)
        raise BudgetError(err.code, err.message, path=err.path, hint=err.hint) from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BudgetError("budget.malformed", f"cannot read budget file: {err}", path=str(p)) from err
    return parse_budget(text, path=str(p))


def parse_budget(text: str, path: str | None = None) -> Budget:
    """Parse budget TOML text (see module docstring) into a :class:`Budget`."""
    if len(text) > MAX_BUDGET_BYTES:
        raise BudgetError("budget.malformed", f"the budget is {len(text):,} characters, over the "
                          f"{MAX_BUDGET_BYTES:,} a budget may have", path=path,
                          hint="a budget holds a few limits; check that this is the right file")
    try:
        data = tomllib.loads(text)
    except RecursionError as err:  # arrays or inline tables nested thousands deep
        raise BudgetError("budget.malformed", "the TOML is nested too deeply to be a budget", path=path,
                          hint='limits are flat strings such as hdbi = ">= 0.2"') from err
    except tomllib.TOMLDecodeError as err:
        found = _TOML_LINE.search(str(err))
        where = f"line {found.group(1)}, column {found.group(2)}" if found else None
        # tomllib's message ends with "(at line L, column C)"; that goes to `location` alone
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(err))
        raise BudgetError("budget.malformed", f"not valid TOML: {message}", path=path, location=where,
                          hint='limits are strings such as hdbi = ">= 0.2"') from err
    budget = Budget(path=path)
    ctx = _Context(text, path)
    for key, value in data.items():
        if key == "allow_unmeasured":
            budget.allow_unmeasured = ctx.boolean(key, value)
        elif key == "regression":
            budget.regression = ctx.regression(value)
        elif key in SCOPES:
            budget.limits.extend(ctx.limits(key, value))
        else:
            ctx.fail(key, None, f"unknown table [{key}]",
                     hint=f"tables are {', '.join(SCOPES)} and regression")
    return budget


@dataclass
class _Context:
    """Validation helpers that know the source text, to name the line of a key."""

    text: str
    path: str | None

    def fail(self, table: str, key: str | None, message: str, hint: str | None = None,
             code: str = "budget.malformed") -> None:
        line = key_line(self.text, table, key)
        dotted = f"{table}.{key}" if key else table
        where = f"line {line}, key {dotted}" if line else f"key {dotted}"
        raise BudgetError(code, message, path=self.path, location=where, hint=hint)

    def boolean(self, key: str, value) -> bool:
        if not isinstance(value, bool):
            self.fail(key, None, f"{key} must be true or false")
        return value

    def limits(self, scope: str, table) -> list[Limit]:
        if not isinstance(table, dict):
            self.fail(scope, None, f"[{scope}] must be a table of limits",
                      hint=f'write [{scope}] on its own line, then metric = "<= 100"')
        return [self.limit(scope, key, value) for key, value in table.items()]

    def limit(self, scope: str, key: str, value) -> Limit:
        self.metric(scope, key)
        if not isinstance(value, str):
            self.fail(scope, key, f"limit {value!r} is not a comparison string",
                      hint=f'quote it with an operator, e.g. {key} = "<= {value}"')
        found = _COMPARISON.match(value)
        if not found:
            self.fail(scope, key, f"limit {value!r} is not a comparison",
                      hint='use one of >=, <=, >, <, ==, != and a number, e.g. ">= 0.2"')
        threshold = float(found.group(2))
        if not math.isfinite(threshold):  # "<= 1e999" parses as inf
            self.fail(scope, key, f"limit {value!r} is not a finite number", hint="give a finite threshold")
        return Limit(scope, key, found.group(1), threshold, key_line(self.text, scope, key))

    def metric(self, table: str, key: str) -> None:
        if key in RENAMED_METRICS:
            new, holds, elapsed = RENAMED_METRICS[key]
            self.fail(table, key, f"metric {key!r} was renamed: it is {new}, {holds}",
                      code="budget.renamed_metric",
                      hint=f"write {new} to keep this limit on the sum, or {elapsed}")
        if key not in METRIC_KEYS:
            self.fail(table, key, f"unknown metric {key!r}", code="budget.unknown_metric",
                      hint="metric names are the summary keys listed in docs/ci.md")
        if key in TEXT_METRICS:
            self.fail(table, key, f"{key} is text, not a number; it cannot take a limit")

    def regression(self, table) -> list[RegressionLimit]:
        if not isinstance(table, dict):
            self.fail("regression", None, "[regression] must be a table")
        out = []
        for key, value in table.items():
            if key in PHASES or key == "all":
                if not isinstance(value, dict):
                    self.fail("regression", key, f"[regression.{key}] must be a table")
                out.extend(self.relative(f"regression.{key}", key, k, v) for k, v in value.items())
            else:
                out.append(self.relative("regression", None, key, value))
        return out

    def relative(self, table: str, scope: str | None, key: str, value) -> RegressionLimit:
        if key != "max_pct":
            self.metric(table, key)
            if key not in WORSE_DIRECTION:
                self.fail(table, key, f"{key} has no worse direction; it cannot take a regression limit")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            self.fail(table, key, f"regression limit {value!r} must be a finite, non-negative number of percent",
                      hint=f"e.g. {key} = 5")
        return RegressionLimit(scope, key, float(value), key_line(self.text, table, key))


_HEADER = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\s\"]+?)\s*\]\s*(#.*)?$")


def key_line(text: str, table: str, key: str | None) -> int | None:
    """1-based line of ``key`` inside ``[table]`` (or of the header when key is None)."""
    current = ""
    key_re = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=") if key else None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            current = header.group(1).replace(" ", "").replace('"', "")
            if key is None and current == table:
                return number
            continue
        if key_re is not None and current == table and key_re.match(line):
            return number
        if key_re is None and current == "" and re.match(rf"^\s*{re.escape(table)}\s*=", line):
            return number
    return None


def regression_metrics() -> tuple[str, ...]:
    """The metrics that ``max_pct`` covers (an increase is worse for each)."""
    return ORCHESTRATION_METRICS
