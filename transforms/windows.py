"""The gold tables' time windows: which window a row falls in, and how much of an interval lies in each."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

WINDOWS = ("minute", "hour", "day")
WINDOW_US = {"minute": 60_000_000, "hour": 3_600_000_000, "day": 86_400_000_000}


def _known(window: str) -> None:
    if window not in WINDOWS:
        raise ValueError(f"unknown window {window!r}; use one of {', '.join(WINDOWS)}")


def with_window(df: DataFrame, window: str = "hour") -> DataFrame:
    """Add `window` (its size) and `window_start` (UTC start of the window holding `t_start`)."""
    _known(window)
    return df.withColumns({"window": F.lit(window), "window_start": F.date_trunc(window, F.col("t_start"))})


def split_by_window(intervals: DataFrame, window: str) -> DataFrame:
    """One row per (interval, window it overlaps): the interval's columns with `window_us` (the window's start,
    µs) and `overlap_us` (how much of [from_us, to_us) lies in it). Empty intervals give no row."""
    _known(window)
    size = F.lit(WINDOW_US[window])

    def start_us(t_us):
        return F.unix_micros(F.date_trunc(window, F.timestamp_micros(t_us)))

    return (
        intervals.filter(F.col("to_us") > F.col("from_us"))
        .withColumn("window_us", F.explode(F.sequence(start_us(F.col("from_us")), start_us(F.col("to_us") - 1), size)))
        .withColumn(
            "overlap_us",
            F.least(F.col("to_us"), F.col("window_us") + size) - F.greatest(F.col("from_us"), F.col("window_us")),
        )
    )
