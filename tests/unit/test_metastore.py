"""Tables addressable by catalog and schema name as well as by path (conf `metastore:`)."""

from __future__ import annotations

import uuid

import pytest

from ackreplay.config import ConfigError, MetastoreSettings, parse_config
from ackreplay.storage.lakehouse import read_table, replace_rows
from ackreplay.storage.metastore import MetastoreError, register_tables, table_name
from tests.helpers import assert_df_equality

PARTITIONS_DDL = "cluster STRING, topic STRING, partition INT, replication_factor INT"


def test_conf_names_catalog_and_schema():
    config = parse_config({"metastore": {"catalog": "main", "schema": "ackreplay"}})
    assert table_name(config.metastore, "policy_summary") == "`main`.`ackreplay`.`policy_summary`"
    assert table_name(MetastoreSettings(schema="ackreplay"), "isr_changes") == "`ackreplay`.`isr_changes`"
    assert parse_config({}).metastore is None


def test_conf_rejects_dotted_or_missing_names():
    with pytest.raises(ConfigError, match="metastore.catalog.*one catalog or schema name"):
        parse_config({"metastore": {"catalog": "main.ackreplay", "schema": "x"}})
    with pytest.raises(ConfigError, match="metastore.schema"):
        parse_config({"metastore": {"catalog": "main"}})


def test_unknown_table_name_is_an_error():
    with pytest.raises(ValueError, match="unknown table 'policy_sumary'"):
        table_name(MetastoreSettings(schema="s"), "policy_sumary")


@pytest.fixture
def schema(spark, tmp_path):
    name = f"ackreplay_test_{uuid.uuid4().hex[:8]}"
    # A schema with its own location keeps the session catalog from creating spark-warehouse/ in the checkout.
    spark.sql(f"CREATE SCHEMA `{name}` LOCATION '{tmp_path / 'schema'}'")
    yield MetastoreSettings(catalog="spark_catalog", schema=name)
    spark.sql(f"DROP SCHEMA `{name}` CASCADE")


def _partitions(spark, rows):
    return spark.createDataFrame(rows, PARTITIONS_DDL)


def test_registered_tables_read_the_same_rows_as_their_paths(spark, tmp_path, schema):
    lakehouse = str(tmp_path / "lakehouse")
    replace_rows(
        _partitions(spark, [("c1", "orders", 0, 3), ("c1", "orders", 1, 3)]),
        lakehouse,
        "partitions",
        "cluster = 'c1'",
        "run-1",
    )

    names = register_tables(spark, lakehouse, schema)

    # Only tables that exist in the lakehouse are registered.
    assert names == [f"`spark_catalog`.`{schema.schema_name}`.`partitions`"]
    assert_df_equality(
        spark.table(table_name(schema, "partitions")), read_table(spark, lakehouse, "partitions"), ignore_row_order=True
    )
    # Later writes by path are seen by name (the catalog entry is an external table over the path), and a
    # second registration keeps the entry.
    replace_rows(_partitions(spark, [("c2", "audit", 0, 1)]), lakehouse, "partitions", "cluster = 'c2'", "run-2")
    assert register_tables(spark, lakehouse, schema) == names
    assert sorted(tuple(r) for r in spark.table(table_name(schema, "partitions")).collect()) == [
        ("c1", "orders", 0, 3),
        ("c1", "orders", 1, 3),
        ("c2", "audit", 0, 1),
    ]


def test_a_name_registered_over_another_lakehouse_is_an_error(spark, tmp_path, schema):
    for lakehouse in ("first", "second"):
        replace_rows(
            _partitions(spark, [("c1", "orders", 0, 3)]),
            str(tmp_path / lakehouse),
            "partitions",
            "cluster = 'c1'",
            "run-1",
        )
    register_tables(spark, str(tmp_path / "first"), schema)
    with pytest.raises(MetastoreError, match=r"partitions`? is already registered over .*first/silver/partitions"):
        register_tables(spark, str(tmp_path / "second"), schema)
