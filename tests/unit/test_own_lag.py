"""Each cluster's own replica.lag.time.max.ms, from the brokers' config dumps or the conf."""

from __future__ import annotations

from datetime import date, datetime

from ackreplay.replay.own_lag import OwnLag, own_lags
from ackreplay.schemas.broker_logs import BROKER_CONFIGS


def _setting(cluster, broker, value, at, setting="replica.lag.time.max.ms", line=1):
    when = datetime.fromisoformat(at)
    return (
        cluster,
        broker,
        setting,
        value,
        when,
        f"{cluster}/broker-{broker}/server.log",
        line,
        date(2026, 11, 25),
        "r1",
    )


def test_the_own_lag_is_each_brokers_last_start_and_the_conf_overrides_it(spark):
    """`same`: three brokers at 5000 (broker 2 restarted with it after 3000); `mixed`: broker 2 still at
    3000; `none`: no dump of the setting (another setting only); `given`: the conf says 3000 where the
    brokers logged 5000 (the conf wins and the console says both); `absent` logged nothing at all."""
    rows = [
        _setting("same", 1, 5000, "2026-11-25 10:00:00"),
        _setting("same", 2, 3000, "2026-11-25 10:00:00"),
        _setting("same", 2, 5000, "2026-11-25 11:00:00", line=900),
        _setting("same", 3, 5000, "2026-11-25 10:00:00"),
        _setting("mixed", 1, 5000, "2026-11-25 10:00:00"),
        _setting("mixed", 2, 3000, "2026-11-25 10:00:00"),
        _setting("none", 1, 500, "2026-11-25 10:00:00", setting="replica.fetch.wait.max.ms"),
        _setting("given", 1, 5000, "2026-11-25 10:00:00"),
    ]
    configs = spark.createDataFrame(rows, BROKER_CONFIGS)
    lags = own_lags(configs, ["same", "mixed", "none", "given", "absent"], {"given": 3000})
    assert lags == {
        "same": OwnLag("same", 5000.0, "replica.lag.time.max.ms=5000 (brokers 1, 2, 3, at their last start)"),
        "mixed": OwnLag("mixed", None, "its brokers logged different replica.lag.time.max.ms (1: 5000, 2: 3000)"),
        "none": OwnLag("none", None, "no replica.lag.time.max.ms in a 'KafkaConfig values:' dump of its server.log"),
        "given": OwnLag(
            "given", 3000.0, "replica.lag.time.max.ms=3000 (conf: clusters.given); its brokers logged 5000"
        ),
        "absent": OwnLag(
            "absent", None, "no replica.lag.time.max.ms in a 'KafkaConfig values:' dump of its server.log"
        ),
    }
