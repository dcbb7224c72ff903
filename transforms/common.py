"""Column helpers shared by the transforms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType


def plus_ms(ts: Column, ms: Column) -> Column:
    """`ts` shifted by `ms` milliseconds, kept to the microsecond."""
    return F.timestamp_micros(F.unix_micros(ts) + F.round(ms * F.lit(1000.0)).cast("bigint"))


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """Select exactly the contract's columns, in its order and types."""
    return df.select(*[F.col(field.name).cast(field.dataType).alias(field.name) for field in schema.fields])


def literal_map(pairs: dict[str, str], value_type: str = "string") -> Column:
    """A map<string, value_type> literal (an empty map when `pairs` is empty)."""
    if not pairs:
        return F.lit(None).cast(f"map<string,{value_type}>")
    return F.create_map(*[x for k, v in sorted(pairs.items()) for x in (F.lit(k), F.lit(v))]).cast(
        f"map<string,{value_type}>"
    )


@dataclass(frozen=True)
class PerCluster:
    """A number that is `default` for every cluster but those in `by_cluster` (e.g. the producers' linger.ms, conf
    `replay.producer` and `clusters.<name>.producer`)."""

    default: float
    by_cluster: Mapping[str, float] = field(default_factory=dict)

    def of(self, cluster: str) -> float:
        return self.by_cluster.get(cluster, self.default)

    def column(self) -> Column:
        """The row's cluster's value (the frame has a `cluster` column)."""
        value = F.lit(float(self.default))
        for cluster, number in sorted(self.by_cluster.items()):
            if number != self.default:
                value = F.when(F.col("cluster") == cluster, F.lit(float(number))).otherwise(value)
        return value


def per_cluster(value: float | PerCluster) -> PerCluster:
    """`value` as a PerCluster (a plain number: the same for every cluster)."""
    return value if isinstance(value, PerCluster) else PerCluster(float(value))
