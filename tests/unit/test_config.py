import pytest
from pydantic import ValidationError

from ackreplay.config import AppConfig, ConfigError, load_config, parse_config


def test_defaults_are_local():
    config = parse_config({})
    assert config.spark.master == "local[*]"
    assert config.lakehouse == "lakehouse"
    assert config.cluster("any").log_timezone == "UTC"


def test_repository_confs_load():
    local = load_config("conf/local.yaml")
    assert local.cluster("lab-4.1.1").log_timezone == "Europe/Berlin"
    assert local.cluster("unknown").log_timezone == "UTC"
    # ProducerPerformance's linger.ms=0 on the perf-fast corpus traces; Kafka 4's default 5 elsewhere
    assert (local.producer_of("perf-fast-4.4.0").linger_ms, local.producer_of("lab-3.9.1").linger_ms) == (0.0, 5.0)
    cluster = load_config("conf/cluster.yaml")
    assert cluster.spark.master is None
    assert cluster.spark.delta_package == "io.delta:delta-spark_4.1_2.13:4.4.0"


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match=r"unknown key 'spark.mastr'"):
        parse_config({"spark": {"mastr": "local[1]"}})


def test_wrong_type_is_named():
    with pytest.raises(ConfigError, match=r"key 'ingest.max_line_bytes'"):
        parse_config({"ingest": {"max_line_bytes": "big"}})


def test_a_quorum_of_one_is_refused_naming_kip250():
    with pytest.raises(ConfigError, match=r"replay\.quorum_sizes.*KIP-250 quorum sizes are > 1"):
        parse_config({"replay": {"quorum_sizes": [2, 1]}})
    assert parse_config({"replay": {"quorum_sizes": [2, 4]}}).replay.quorum_sizes == [2, 4]


def test_unknown_time_zone_is_named():
    with pytest.raises(ConfigError, match=r"key 'clusters.c1.log_timezone'.*unknown time zone 'Mars/Base'"):
        parse_config({"clusters": {"c1": {"log_timezone": "Mars/Base"}}})


def test_clock_offsets_accept_integers():
    config = parse_config({"clusters": {"c1": {"broker_clock_offsets_ms": {1: 250, 2: -1.5}}}})
    assert config.cluster("c1").broker_clock_offsets_ms == {1: 250.0, 2: -1.5}


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("spark: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(listed)


def test_config_is_immutable():
    config = AppConfig()
    with pytest.raises(ValidationError):
        config.lakehouse = "elsewhere"


def test_reading_send_times_from_kafka_adds_sparks_kafka_source_and_refuses_the_options_it_sets():
    import pyspark

    plain = parse_config({})
    assert plain.session_settings() == plain.spark
    kafka = {"kafka.bootstrap.servers": "broker-1:9092"}
    reads = parse_config({"clusters": {"prod": {"create_times_from_kafka": kafka}}, "spark": {"packages": ["g:a:1"]}})
    assert reads.session_settings().packages == [
        "g:a:1",
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}",
    ]
    listed = parse_config(
        {
            "default_cluster": {"create_times_from_kafka": kafka},
            "spark": {"packages": ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.0"]},
        }
    )
    assert listed.session_settings().packages == ["org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.0"]
    with pytest.raises(ConfigError, match="create_times_from_kafka.*needs kafka.bootstrap.servers"):
        parse_config({"clusters": {"prod": {"create_times_from_kafka": {"kafka.security.protocol": "SSL"}}}})
    with pytest.raises(ConfigError, match="endingOffsets, startingOffsets: ackreplay reads the partitions and offsets"):
        parse_config(
            {
                "clusters": {
                    "prod": {
                        "create_times_from_kafka": {**kafka, "startingOffsets": "earliest", "endingOffsets": "latest"}
                    }
                }
            }
        )


def test_a_clusters_producers_keep_the_other_settings_of_replay_producer():
    config = parse_config(
        {
            "replay": {"producer": {"linger_ms": 5, "max_in_flight": 3}},
            "default_cluster": {"producer": {"batch_size": 1_000}},
            "clusters": {"old-clients": {"producer": {"linger_ms": 0}}, "other": {"log_timezone": "UTC"}},
        }
    )
    old = config.producer_of("old-clients")
    assert (old.linger_ms, old.max_in_flight, old.batch_size) == (0.0, 3, 16_384)
    assert config.producer_of("other") == config.replay.producer  # named, without a producer block
    unnamed = config.producer_of("unnamed")
    assert (unnamed.linger_ms, unnamed.max_in_flight, unnamed.batch_size) == (5.0, 3, 1_000)
    assert config.producer_of(None) == unnamed


def test_a_clusters_producer_keys_are_checked_as_replay_producers():
    with pytest.raises(ConfigError, match=r"'clusters.c1.producer.lingerms': unknown key$"):
        parse_config({"clusters": {"c1": {"producer": {"lingerms": 0}}}})
    with pytest.raises(ConfigError, match=r"'default_cluster.producer.max_in_flight': Input should be a valid integer"):
        parse_config({"default_cluster": {"producer": {"max_in_flight": 2.5}}})
    with pytest.raises(ConfigError, match=r"'clusters.c1.producer.linger_ms': Input should be greater than or equal"):
        parse_config({"clusters": {"c1": {"producer": {"linger_ms": -1}}}})
