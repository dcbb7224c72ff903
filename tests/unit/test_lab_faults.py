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
