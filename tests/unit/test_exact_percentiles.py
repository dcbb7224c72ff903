"""The ground truth's exact high percentiles equal Spark's `percentile` over every value."""

from __future__ import annotations

import numpy as np
from pyspark.sql import functions as F

from ackreplay.replay.stage import exact_high_percentiles


def test_exact_high_percentiles_equal_spark_percentile_with_ties_nulls_and_tiny_inputs(spark):
    rng = np.random.default_rng(3)
    waits = np.round(rng.lognormal(1.0, 1.2, 60_000), 1)  # many ties at 0.1 ms
    rows = [(float(w), None if i % 7 == 0 else float(w) * 2) for i, w in enumerate(waits)]
    df = spark.createDataFrame(rows + [(None, 1.0)], "a double, b double")
    for p in (0.999, 0.99, 0.9):
        got = exact_high_percentiles(df, {"a": F.col("a"), "b": F.col("b")}, p)
        want = df.agg(F.percentile("a", p).alias("a"), F.percentile("b", p).alias("b")).first()
        assert got == {"a": want["a"], "b": want["b"]}, p
    tiny = spark.createDataFrame([(1.0,), (5.0,), (2.0,)], "a double")
    assert exact_high_percentiles(tiny, {"a": F.col("a")}, 0.999) == {
        "a": tiny.agg(F.percentile("a", 0.999)).first()[0]
    }
    empty = spark.createDataFrame([(None,)], "a double")
    assert exact_high_percentiles(empty, {"a": F.col("a")}, 0.999) == {"a": None}
