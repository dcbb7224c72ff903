"""ackreplay real-Kafka lab: record request/server/state-change logs from a real 3-broker KRaft cluster.

Run ``python -m lab.record_trace --help``.
"""
