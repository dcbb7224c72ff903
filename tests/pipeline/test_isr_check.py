"""The ISR re-simulated by the kernel (simulate_isr, replica.lag.time.max.ms = 3000 ms as the lab ran)
against the ISR changes the leaders recorded, on both bundled traces (ackreplay/replay/isr_check.py).

What was measured (events paired per follower and kind, closest first, within 10 s):

* The long stall of one broker (3.9.1: broker 2 at 18:31:32; 4.1.1: broker 1 at 20:13:07): the other
  leaders' shrinks of the stalled follower are re-simulated at the leader's own check times (the phase
  of its "Shrinking ISR" lines) and commit after the round trip its nearest logged shrink took (32-94
  ms here): within 45 ms of the recorded commits; its re-adds within 0.3 s.
* The restart of a broker (controlled shutdown): the controller removes the stopping broker from every
  ISR at once (state-change.log only); the re-simulation applies those removals at their recorded time
  and keeps the broker out until its recorded re-add's window (kernel `_controller_removals`).
* The re-adds after the restart: within 0.3 s (3.9.1) / 0.5 s (4.1.1).
* The stalled leader's own partitions: it ran no check while stopped, and once resumed ran the overdue
  one (4.1.1: 1.4 ms after its first request, both followers of partitions 2 and 3 out, ISR [1]; 3.9.1:
  62 ms after, partition 5's follower 1). The re-simulation checks at that logged proposal; what it
  misses there is where inside a FETCH the leader recorded a follower's LEO, or appended a batch:
  - 3.9.1, partition 5: follower 1's first FETCH after the stall took 87 ms; the replay places its LEO
    at the middle, before the check, the broker recorded it after;
  - 4.1.1, partition 2: the batch that put the leader ahead of its followers was appended before the
    check, within a request whose local time ended 2.5 ms after it (the replay's append time).
* 4.1.1: the lab's orderly shutdown after the workload removes brokers 2 and 3 from broker 1's ISRs: the
  controller's removals, reproduced as such.
"""

from __future__ import annotations

import pandas as pd
import pytest

from ackreplay.config import load_config
from ackreplay.replay.isr_check import compare_isr
from tests.conftest import SAMPLES

# A re-simulated shrink commits the AlterPartition round trip of the leader's logged shrink nearest in
# time after it is proposed; the round trips of one leader differ by a few tens of ms.
SHRINK_DT_MS = 60
STALL = {  # trace -> (stalled broker, shrink |dt| max ms, re-add |dt| max ms, its time window (HH:MM:SS))
    "trace-3.9.1-utc": (2, SHRINK_DT_MS, 300, ("18:31:30", "18:31:45")),
    "trace-4.1.1-berlin": (1, SHRINK_DT_MS, 300, ("20:13:05", "20:13:20")),
}


@pytest.fixture(scope="module", params=SAMPLES, ids=[p.name for p in SAMPLES])
def comparison(request, spark, sample_run):
    lakehouse = sample_run(request.param).lakehouse
    result = compare_isr(spark, load_config("conf/local.yaml"), lakehouse, lag_ms=3000.0, window_ms=10_000.0)
    print("\n".join(result.table_lines()))
    return request.param.name, result, lakehouse


def _hms(rows, column):
    return pd.to_datetime(rows[column], unit="us").dt.strftime("%H:%M:%S")


def test_long_stall_shrinks_and_re_adds_are_reproduced(comparison):
    name, result, _ = comparison
    stalled, shrink_ms, expand_ms, (start, end) = STALL[name]
    rows = result.rows()
    recorded = rows[rows["status"] != "spurious"]
    t = _hms(recorded, "t_recorded_us")
    in_stall = recorded[(t >= start) & (t <= end) & (recorded["follower"] == stalled) & (recorded["leader"] != stalled)]
    shrinks, expands = in_stall[in_stall["kind"] == "shrink"], in_stall[in_stall["kind"] == "expand"]
    assert len(shrinks) == 4 and len(expands) == 4  # the four partitions the other brokers lead
    assert (in_stall["status"] == "matched").all()
    assert shrinks["dt_ms"].abs().max() <= shrink_ms
    assert expands["dt_ms"].abs().max() <= expand_ms


def test_the_controllers_removals_are_reproduced_at_their_time(comparison):
    name, result, _ = comparison
    rows = result.rows()
    shrinks = rows[(rows["status"] == "matched") & (rows["kind"] == "shrink")]
    exact = shrinks[shrinks["dt_ms"] == 0]
    # 3.9.1: the controlled shutdown of broker 3 (the 4 partitions it followed); 4.1.1: that of broker 2 and,
    # after the workload, the lab's orderly shutdown of brokers 2 and 3 (broker 1's partitions 2 and 3)
    by_controller = (
        [(1, 3, "18:32:11"), (2, 3, "18:32:11"), (3, 3, "18:32:11"), (5, 3, "18:32:11")]
        if "3.9.1" in name
        else [(1, 2, "20:13:48"), (2, 2, "20:13:48"), (2, 2, "20:15:16"), (2, 3, "20:15:16"), (3, 2, "20:13:48"),
              (3, 2, "20:15:16"), (3, 3, "20:15:16"), (5, 2, "20:13:48")]
    )  # fmt: skip
    # also at their recorded time: every lag shrink the leader logged a proposal for in the run the re-simulation
    # proposes it in (they commit when the log says: the follower stall's, and on 4.1.1 the resumed leader's)
    own_round_trip = (
        [(0, 2, "18:31:36"), (1, 2, "18:31:35"), (3, 2, "18:31:35"), (4, 2, "18:31:36")]
        if "3.9.1" in name
        else [(0, 1, "20:13:10"), (1, 1, "20:13:10"), (3, 2, "20:13:13"), (3, 3, "20:13:13"), (4, 1, "20:13:10"),
              (5, 1, "20:13:10")]
    )  # fmt: skip
    assert sorted(zip(exact["partition"], exact["follower"], _hms(exact, "t_recorded_us"), strict=False)) == sorted(
        by_controller + own_round_trip
    )
    # every other matched shrink is a lag shrink of the long stall or at the stalled leader's resume
    assert shrinks["dt_ms"].abs().max() <= SHRINK_DT_MS


def test_every_expand_is_reproduced_and_the_mismatches_are_the_known_ones(comparison):
    name, result, _ = comparison
    rows = result.rows()
    spurious = rows[rows["status"] == "spurious"]
    missed = rows[rows["status"] == "missed"]
    # nothing spurious; missed: at the stalled leader's resume, one partition per trace (module doc)
    assert len(spurious) == 0
    if "3.9.1" in name:
        assert (missed["leader"] == 2).all()
        assert sorted(zip(missed["partition"], missed["follower"], missed["kind"], strict=False)) == [
            (5, 1, "expand"),
            (5, 1, "shrink"),
        ]
    else:
        assert (missed["leader"] == 1).all() and _hms(missed, "t_recorded_us").between("20:13:13", "20:13:14").all()
        assert sorted(zip(missed["partition"], missed["follower"], missed["kind"], strict=False)) == [
            (2, 2, "expand"), (2, 2, "shrink"), (2, 3, "expand"), (2, 3, "shrink"),
        ]  # fmt: skip
