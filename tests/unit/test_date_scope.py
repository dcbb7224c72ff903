"""The replay's date scope (ackreplay.replay.stage.DateScope): its Column, its replaceWhere SQL and its partition
filters (the Arrow writer's delta-rs commits) select the same rows."""

from __future__ import annotations

from datetime import date, timedelta

from pyspark.sql import functions as F

from ackreplay.replay.stage import DateScope
from ackreplay.storage.arrow_delta import in_conjunction

NOV = [date(2026, 11, 18) + timedelta(days=i) for i in range(6)]  # 18th .. 23rd


def _in_filters(scope: DateScope, values: dict) -> bool:
    return any(in_conjunction(values, conjunction) for conjunction in scope.partition_filters())


def _selected(spark, scope: DateScope) -> tuple[list, list, list]:
    rows = [(c, d) for c in ("a", "b", "c") for d in [*NOV, None]]
    df = spark.createDataFrame(rows, "cluster string, event_date date")
    by_column = sorted((tuple(r) for r in df.filter(scope.column()).collect()), key=str)
    by_sql = sorted((tuple(r) for r in df.filter(F.expr(scope.sql())).collect()), key=str)
    by_values = sorted(
        ((c, d) for c, d in rows if _in_filters(scope, {"cluster": c, "event_date": d.isoformat() if d else None})),
        key=str,
    )
    return by_column, by_sql, by_values


def test_column_sql_and_partition_values_select_the_same_rows(spark):
    scope = DateScope(("a", "b"), {"a": (NOV[1], NOV[2]), "b": (None, NOV[0])})
    by_column, by_sql, by_values = _selected(spark, scope)
    assert by_column == by_sql == by_values == [("a", NOV[1]), ("a", NOV[2]), ("b", NOV[0])]
    assert scope.sql() == "(cluster = 'a' AND event_date >= DATE'2026-11-19' AND event_date <= DATE'2026-11-20') OR " \
                          "(cluster = 'b' AND event_date <= DATE'2026-11-18')"  # fmt: skip


def test_a_cluster_without_dates_is_whole_and_widening_moves_only_the_bounds(spark):
    scope = DateScope(("a", "c"), {"a": (NOV[2], NOV[2])}).widened(1)
    by_column, by_sql, by_values = _selected(spark, scope)
    whole_c = [("c", d) for d in [None, *NOV]]
    assert by_column == by_sql == by_values == sorted([("a", NOV[1]), ("a", NOV[2]), ("a", NOV[3]), *whole_c], key=str)
    assert DateScope((), {}).sql() == "false" and not _in_filters(
        DateScope((), {}), {"cluster": "a", "event_date": None}
    )
