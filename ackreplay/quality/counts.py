"""The counts GX reports for a table's value expectations, computed in one Spark job per table.

Great Expectations validates each expectation with Spark jobs and DataFrames of its own: on a run's small
tables that was most of the data-quality time (15 of 28 s of a warm tiny run's checks; 0.5-4 s per table
whatever its size). The expectation types the catalog uses are row counts, so all of a table's are one
aggregate here, each with GX's own definitions (element, missing and unexpected counts, the percent and
its edge cases); `tests/unit/test_quality_counts.py` checks every type against GX itself. GX stays the
reference: the runner hands every expectation these counts fail to GX, whose result (with sample rows)
is what is recorded, and any type not listed here goes to GX as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

COLUMN_MAP = ("ExpectColumnValuesToBeBetween", "ExpectColumnValuesToBeInSet")
NULLNESS = ("ExpectColumnValuesToNotBeNull", "ExpectColumnValuesToBeNull")
UNIQUE = "ExpectCompoundColumnsToBeUnique"
COUNTED = (*COLUMN_MAP, *NULLNESS, UNIQUE)


@dataclass(frozen=True)
class Counts:
    """An expectation's result as GX reports it (`result_format` BASIC): rows in its domain (the row
    condition applied), unexpected rows (None when the domain is empty, as GX), their percent."""

    element_count: int
    unexpected_count: int | None
    unexpected_percent: float | None

    @property
    def success(self) -> bool:
        return not self.unexpected_count


def countable(class_name: str, kwargs: dict) -> bool:
    """Whether this module computes the expectation (else GX runs it): a listed type, without `mostly` or
    options the translation does not know."""
    known = {"column", "column_list", "min_value", "max_value", "value_set", "row_condition", "condition_parser"}
    return class_name in COUNTED and set(kwargs) <= known and kwargs.get("condition_parser", "spark") == "spark"


def expectation_counts(df: DataFrame, specs: list[tuple[str, dict]]) -> list[Counts]:
    """GX's counts for each (class name, arguments) of `specs` (all `countable`) on `df`, in one Spark job.
    Raises Spark's AnalysisException when an argument names a column `df` does not have."""
    if not specs:
        return []
    frame, aggregates = df, []
    for i, (class_name, kwargs) in enumerate(specs):
        domain = _domain(kwargs)
        if class_name == UNIQUE:
            columns = kwargs["column_list"]
            considered = domain & ~_all_null(columns)
            # rows sharing their values with another row of the domain (nulls equal, as GX's window does)
            group = F.count(F.lit(1)).over(Window.partitionBy(*[F.col(c) for c in columns], considered))
            frame = frame.withColumn(f"__ackreplay_group_{i}", group)
            unexpected = considered & (F.col(f"__ackreplay_group_{i}") > 1)
        else:
            value = F.col(kwargs["column"])
            if class_name == "ExpectColumnValuesToNotBeNull":
                considered, unexpected = domain, domain & value.isNull()
            elif class_name == "ExpectColumnValuesToBeNull":
                considered, unexpected = domain, domain & value.isNotNull()
            else:
                considered = domain & value.isNotNull()
                unexpected = considered & ~F.coalesce(_expected(class_name, kwargs, value), F.lit(False))
        aggregates += [F.count_if(domain), F.count_if(considered), F.count_if(unexpected)]
    (row,) = frame.agg(*aggregates).collect()
    return [_counts(class_name, *row[3 * i : 3 * i + 3]) for i, (class_name, _) in enumerate(specs)]


def _domain(kwargs: dict) -> Column:
    condition = kwargs.get("row_condition")
    return F.coalesce(F.expr(condition), F.lit(False)) if condition else F.lit(True)


def _all_null(columns: list[str]) -> Column:
    out = F.lit(True)
    for c in columns:
        out = out & F.col(c).isNull()
    return out


def _expected(class_name: str, kwargs: dict, value: Column) -> Column:
    if class_name == "ExpectColumnValuesToBeInSet":
        return value.isin(list(kwargs["value_set"]))
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    out = F.lit(True)
    if low is not None:
        out = out & (value >= F.lit(low))
    if high is not None:
        out = out & (value <= F.lit(high))
    return out


def _counts(class_name: str, element: int, considered: int, unexpected: int) -> Counts:
    if element == 0:  # GX: no unexpected count on an empty domain, except for its compound uniqueness (0)
        return Counts(0, 0 if class_name == UNIQUE else None, None)
    percent = unexpected / considered * 100 if considered else None
    return Counts(element, unexpected, percent)
