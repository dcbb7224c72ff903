"""ackreplay: replay Kafka produce requests from broker telemetry under alternative ack policies."""

__version__ = "0.1.0"
