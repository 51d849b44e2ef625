"""Command line: ``kgc serve`` (or ``python -m daemon serve``) runs the coordinator daemon.

    kgc serve [--kafka-listen HOST:PORT] [--http-listen HOST:PORT] [--topic NAME:PARTITIONS ...] [--config FILE]
              [--set NAME=VALUE ...]

Command-line values override environment variables (``KGC_...``), which override the ``--config`` TOML file. More
subcommands (groups, export) hang off the same parser.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from coordinator.topics import parse_topic_spec
from daemon.settings import (
    Settings,
    SettingsError,
    listen_override,
    load_settings,
    parse_set_options,
)

log = logging.getLogger("coordinator")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgc", description="Kafka-wire-compatible consumer-group coordinator")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the coordinator daemon")
    serve.add_argument("--kafka-listen", metavar="HOST:PORT", help="Kafka listener (default 127.0.0.1:9092)")
    serve.add_argument("--advertise", metavar="HOST:PORT", help="address clients are told to connect to")
    serve.add_argument("--http-listen", metavar="HOST:PORT", help="operator HTTP API (default 127.0.0.1:8080)")
    serve.add_argument(
        "--topic", action="append", default=[], metavar="NAME:PARTITIONS", help="topic to expose (repeatable)"
    )
    serve.add_argument("--config", metavar="FILE", help="TOML settings file")
    serve.add_argument(
        "--storage-url",
        metavar="URL",
        help="database URL, e.g. postgresql://user@host/db (default: SQLite file under --data-dir; 'memory': none)",
    )
    serve.add_argument("--data-dir", metavar="DIR", help="directory of the embedded SQLite database (default ./data)")
    serve.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="Kafka-named setting (repeatable)"
    )
    serve.add_argument("--log-format", choices=("logfmt", "json"), help="log line format (default logfmt)")
    serve.add_argument("--log-level", help="log level (default INFO)")
    serve.set_defaults(func=cmd_serve)
    from daemon.cli import add_groups_subcommands  # groups/topics: clients of the operator HTTP API

    add_groups_subcommands(commands)
    from daemon.export import add_export_subcommand  # incremental Parquet export for analytics

    add_export_subcommand(commands)
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = parse_set_options(args.set)
    kafka = overrides.setdefault("kafka", {})
    if args.kafka_listen:
        kafka.update(listen_override(args.kafka_listen))
    if args.advertise:
        adv = listen_override(args.advertise, "--advertise")
        kafka.update(advertised_host=adv["host"], advertised_port=adv["port"])
    if args.http_listen:
        listen_override(args.http_listen, "--http-listen")  # validate HOST:PORT, naming the option
        overrides["http"] = {"listen": args.http_listen}
    if args.storage_url or args.data_dir:
        storage = overrides.setdefault("storage", {})
        if args.storage_url:
            storage["url"] = args.storage_url
        if args.data_dir:
            storage["data_dir"] = args.data_dir
    if args.topic:
        initial = dict(parse_topic_spec(spec) for spec in args.topic)
        overrides.setdefault("topics", {})["initial"] = initial
    if args.log_format or args.log_level:
        section = overrides.setdefault("log", {})
        if args.log_format:
            section["format"] = args.log_format
        if args.log_level:
            section["level"] = args.log_level
    if not kafka:
        del overrides["kafka"]
    return load_settings(args.config, **overrides)


async def serve(settings: Settings) -> None:
    from daemon.app import App
    from runtime.loop import tune_gc

    app = await App.open(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await app.run_until(stop, on_ready=lambda: tune_gc(settings.runtime.gc_gen0_threshold))


def _run(coro: Any) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


def cmd_serve(args: argparse.Namespace) -> int:
    from runtime.logging_setup import setup_logging
    from storage.errors import StorageError

    try:
        settings = settings_from_args(args)
    except (SettingsError, ValueError) as exc:
        message = str(exc) if not isinstance(exc, ValidationError) else _validation_message(exc)
        print(f"kgc: configuration error: {message}", file=sys.stderr)
        return 2
    setup_logging(settings.log.level, settings.log.format)
    # A fatal signal (SIGSEGV, SIGBUS from a mapped file, SIGABRT from native code) cannot be caught, but it must not
    # kill the daemon without a word: Python writes the signal and every thread's stack to stderr first.
    faulthandler.enable()
    try:
        _run(serve(settings))
    except (OSError, StorageError) as exc:
        log.error("cannot start: %s", exc)
        return 1
    return 0


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
