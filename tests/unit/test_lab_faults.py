"""The lab's fault schedule: leader crashes (lab.record_trace --crashes)."""

from __future__ import annotations

import pytest

from lab.record_trace import make_schedule, parse_args


def _args(*extra: str):
    return parse_args(["--kafka-version", "4.4.0", "--out", "/tmp/unused", *extra])


def test_crashes_are_scheduled_after_the_other_faults_with_the_followers_paused_first():
    args = _args("--duration-s", "130", "--long-stalls", "0", "--leader-changes", "0", "--crashes", "2",
                 "--leader-down-s", "8", "--seed", "46")  # fmt: skip
    crashes = [e for e in make_schedule(args, [1, 2, 3]) if e["kind"] == "leader_crash"]
    assert [(e["partition"], e["at_s"], e["followers_stall_ms"], e["kill_after_ms"], e["down_s"]) for e in crashes] == [
        (0, 58.5, 1500, 1000, 8.0),
        (1, 84.0, 1500, 1000, 8.0),
    ]


def test_followers_paused_past_the_lag_time_are_refused(capsys):
    with pytest.raises(SystemExit):
        _args("--crashes", "1", "--crash-followers-stall-ms", "6000", "--replica-lag-ms", "5000")
    assert "must be below --replica-lag-ms" in capsys.readouterr().err


def test_the_producers_compression_and_the_topics_min_insync_reach_the_clients_and_the_manifest():
    from lab.record_trace import perf_test_args

    args = _args("--compression", "lz4", "--min-insync-replicas", "1", "--client", "perf-test", "--acks1-share", "0")
    assert (args.compression, args.min_insync_replicas) == ("lz4", 1)
    assert "compression.type=lz4" in perf_test_args(args, "127.0.0.1:1")
    defaults = _args()
    assert (defaults.compression, defaults.min_insync_replicas) == ("none", 2)  # the corpus' earlier traces


def test_an_unknown_compression_is_refused(capsys):
    with pytest.raises(SystemExit):
        _args("--compression", "brotli")
    assert "invalid choice: 'brotli'" in capsys.readouterr().err
