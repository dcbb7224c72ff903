"""The ingest stage: input files into bronze and silver tables (`stage.run_ingest`), with the readers of each
input kind: request logs (`request_log_parser`), broker logs, metrics scrapes, and the producers' send
times from kafka-dump-log output (`dump_log_parser`, `send_times`)."""
