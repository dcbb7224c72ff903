"""`ackreplay` console command: one subcommand per stage, `run` for all stages in order, `export`. It parses the
arguments, builds the session and calls `ackreplay.pipeline`; exit codes and error lines are decided here."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from datetime import date

from ackreplay.config import ConfigError, load_config, parse_config
from ackreplay.console import configure_logging, log_file_for
from ackreplay.quality.runner import QualityError
from ackreplay.replay.self_check import ReplayUntrusted
from ackreplay.storage.inputs import InputError

log = logging.getLogger("ackreplay")

STAGES = ("ingest", "replay", "gold", "report")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ackreplay",
        description="Replay Kafka produce requests from broker telemetry under alternative ack policies.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--conf", help="YAML configuration (conf/local.yaml, conf/cluster.yaml); default: built-in local"
        )
        p.add_argument("--lakehouse", help="lakehouse root folder or URI (default: `lakehouse` from the conf)")
        p.add_argument(
            "--remote",
            metavar="sc://HOST:PORT",
            help="run on this Spark Connect server (overrides spark.remote in the conf and SPARK_REMOTE)",
        )
        p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
        p.add_argument(
            "--metastore",
            metavar="[CATALOG.]SCHEMA",
            help="also register the tables under this catalog and schema (overrides `metastore` in the conf)",
        )

    def untrusted(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--accept-untrusted",
            action="store_true",
            help="when the replay's self-check fails on a cluster, write its gold tables and report anyway, marked "
            "untrusted (policy_summary.self_check, the report's first line); the exit code is then 0",
        )

    def skipping(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--allow-skipped",
            action="store_true",
            help="go on when input files named like logs the replay reads are outside the layout (listed, not read;"
            " ingest.misplaced_files: warning)",
        )

    def scheduled(p: argparse.ArgumentParser, full_help: str) -> None:
        # README, "Scheduling": dates are UTC (the tables' event_date); only new work unless --full.
        p.add_argument("--since", type=date.fromisoformat, metavar="YYYY-MM-DD", help="first UTC date to process")
        p.add_argument("--until", type=date.fromisoformat, metavar="YYYY-MM-DD", help="last UTC date (inclusive)")
        p.add_argument("--full", action="store_true", help=full_help)

    run = sub.add_parser("run", help="run every stage in order on an input folder")
    run.add_argument(
        "--input", required=True, nargs="+", help="input folder(s): <cluster>/broker-<id>/kafka-request.log*, ..."
    )
    common(run)
    skipping(run)
    untrusted(run)
    scheduled(run, "re-ingest every input file on the dates and rebuild every cluster, not only new work")
    ingest = sub.add_parser("ingest", help="raw logs -> bronze request_log_lines/quarantine -> silver tables")
    ingest.add_argument("--input", required=True, nargs="+", help="input folder(s) in the layout of the README")
    common(ingest)
    skipping(ingest)
    scheduled(ingest, "re-ingest every input file on the dates, not only new and changed ones")
    replay = sub.add_parser("replay", help="silver tables -> produce_replay under every configured policy")
    replay.add_argument("--cluster", nargs="+", help="clusters to replay (default: every cluster in produce_requests)")
    common(replay)
    untrusted(replay)
    scheduled(replay, "replay every cluster with produces on the dates, not only those with newly ingested files")
    gold = sub.add_parser(
        "gold", help="produce_replay -> latency_percentiles, risk_exposure, availability, policy_summary"
    )
    gold.add_argument("--cluster", nargs="+", help="clusters to aggregate (default: every cluster in produce_replay)")
    common(gold)
    scheduled(gold, "aggregate every cluster with replayed produces on the dates, not only newly replayed ones")
    report = sub.add_parser(
        "report", help="report.html (interactive charts, one self-contained file) from the gold tables"
    )
    report.add_argument("--out", help="output folder (default: <lakehouse>/report)")
    common(report)
    export = sub.add_parser("export", help="write a table as CSV or Parquet for other tools")
    export.add_argument("table", help="table name, e.g. produce_requests")
    export.add_argument("--format", choices=("csv", "parquet"), required=True)
    export.add_argument("--out", required=True, help="the file to write (with --parts: the folder of part files)")
    export.add_argument("--parts", action="store_true", help="write Spark's folder of part files instead of one file")
    export.add_argument(
        "--replace",
        action="store_true",
        help="replace an existing file, or a folder holding only an earlier export's part files",
    )
    common(export)
    return parser


def _error(line: str) -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()  # a status line on the terminal is cleared first
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """The `ackreplay` command: parse `argv`, run the command, return its exit code (README "Running it")."""
    args = _parser().parse_args(argv)
    configure_logging(args.verbose, None)
    try:
        config = load_config(args.conf)  # validated before Spark starts
        config.privacy.salt()  # hashing identities needs its salt: fail now, not after ingest
        if args.remote:
            config = config.model_copy(update={"spark": config.spark.model_copy(update={"remote": args.remote})})
        if getattr(args, "allow_skipped", False):
            config = config.model_copy(
                update={"ingest": config.ingest.model_copy(update={"misplaced_files": "warning"})}
            )
    except ConfigError as exc:
        _error(f"error: {exc}")
        return 2
    lakehouse = args.lakehouse or config.lakehouse
    metastore = config.metastore
    if args.metastore:
        catalog, _, schema = args.metastore.rpartition(".")
        try:
            metastore = parse_config(
                {"metastore": {"catalog": catalog or None, "schema": schema}}, "--metastore"
            ).metastore
        except ConfigError as exc:
            _error(f"error: {exc}")
            return 2
    from ackreplay.ledger import DateRange

    try:
        dates = DateRange(getattr(args, "since", None), getattr(args, "until", None))
    except ValueError as exc:
        _error(f"error: {exc}")
        return 2
    full = getattr(args, "full", False)

    from ackreplay import pipeline
    from ackreplay.session import build_spark_session

    log_file = log_file_for(lakehouse, args.command)
    console = configure_logging(args.verbose, log_file)
    echo = console.echo if console is not None else print
    detail = args.verbose  # the summaries in full with -v, their main lines without
    started = time.monotonic()
    steps = pipeline.StepTimes()
    try:
        with steps.timed("Spark session"):
            spark = build_spark_session(config.session_settings(), jvm_output=None if args.verbose else log_file)
        if args.command in ("run", "ingest", "replay", "gold"):
            from ackreplay.storage.lakehouse import check_writable

            check_writable(spark, lakehouse)
        if args.command == "run":
            pipeline.run(
                spark,
                config,
                lakehouse,
                args.input,
                dates,
                full,
                args.accept_untrusted,
                steps=steps,
                echo=echo,
                detail=detail,
            )
        elif args.command == "ingest":
            pipeline.ingest(spark, config, lakehouse, args.input, dates, full, echo, steps, detail)
        elif args.command == "replay":
            pipeline.replay(
                spark, config, lakehouse, dates, full, args.cluster, args.accept_untrusted, echo, steps, detail
            )
        elif args.command == "gold":
            pipeline.gold(spark, config, lakehouse, dates, full, args.cluster, echo=echo, steps=steps, detail=detail)
        elif args.command == "report":
            from ackreplay.gold.stage import producers_per_cluster

            lingers = producers_per_cluster(config, "linger_ms")
            html = pipeline.report(spark, lakehouse, args.out, config.report.target, lingers)
            echo(f"report: {html}")
        elif args.command == "export":
            from ackreplay.export import export_table

            written = export_table(spark, lakehouse, args.table, args.format, args.out, args.parts, args.replace)
            echo(f"exported {args.table} to {written} ({args.format}{', part files' if args.parts else ''})")
        if metastore is not None and args.command != "export":
            from ackreplay.storage.metastore import register_tables

            names = register_tables(spark, lakehouse, metastore)
            echo(f"tables: {len(names)} registered as {metastore.prefix}.<table>")
    except QualityError as exc:  # the whole message: it names the table, the check and offending rows
        _error(f"error: {exc}")
        return 1
    except ReplayUntrusted as exc:
        _error(f"error: {exc}")
        return 3
    except (InputError, FileNotFoundError, ValueError) as exc:
        _error(f"error: {exc}")
        return 2
    except Exception as exc:  # a scheduler needs a non-zero exit and the reason on one line
        log.debug("ackreplay %s failed", args.command, exc_info=True)
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        _error(f"error: ackreplay {args.command} failed: {type(exc).__name__}: {first_line}")
        _error(f"(the full trace is in {log_file}; -v prints it here too)")
        return 1
    total = time.monotonic() - started
    if args.command == "run":
        echo("\n".join(steps.summary_lines(total, detail)))
    echo(f"done in {total:.1f} s; lakehouse: {lakehouse}; log: {log_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
