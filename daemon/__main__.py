"""Command line: ``kgc serve`` (or ``python -m daemon serve``) runs the coordinator daemon.

    kgc serve [--kafka-listen HOST:PORT] [--http-listen HOST:PORT] [--topic NAME:PARTITIONS ...] [--config FILE]
              [--set NAME=VALUE ...]

Command-line values override environment variables (``KGC_...``), which override the ``--config`` TOML file. More
subcommands (groups, export) hang off the same parser.
"""

from __future__ import annotations

# Only the standard library at import time: `kgc groups list` must start fast (README, "CLI"). The daemon, its settings
# (pydantic), storage and the Parquet export are imported by the command that needs them.
import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

    from daemon.settings import Settings

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")  # daemon.settings.LOG_LEVELS, without importing it
DEFAULT_CHUNK_ROWS = 50_000  # daemon.export.DEFAULT_CHUNK_ROWS


def _log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"unknown log level {text!r} (choose from {', '.join(LOG_LEVELS)})")
    return text.upper()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgc", description="Kafka-wire-compatible consumer-group coordinator")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the coordinator daemon")
    serve.add_argument("--kafka-listen", metavar="HOST:PORT", help="Kafka listener (default 127.0.0.1:9092)")
    serve.add_argument("--advertise", metavar="HOST:PORT", help="address clients are told to connect to")
    serve.add_argument("--http-listen", metavar="HOST:PORT", help="operator HTTP API (default 127.0.0.1:8080)")
    serve.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME:PARTITIONS",
        help="topic to expose (repeatable; NAME alone: 1 partition)",
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
    serve.add_argument("--log-level", type=_log_level, metavar="LEVEL", help=f"{'|'.join(LOG_LEVELS)} (default INFO)")
    serve.set_defaults(func=cmd_serve)
    from daemon.cli import add_groups_subcommands  # groups/topics: clients of the operator HTTP API (stdlib only)

    add_groups_subcommands(commands)

    # kgc export: incremental Parquet export for analytics; daemon.export (SQLAlchemy, pyarrow) is imported to run it.
    p = commands.add_parser("export", help="incremental Parquet export of the database for analytics")
    p.add_argument("--out", required=True, metavar="DIR", help="export directory (created; state kept inside)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--storage-url", metavar="URL", help="database URL, as for serve")
    src.add_argument("--data-dir", metavar="DIR", help="directory of the embedded SQLite database (default ./data)")
    p.add_argument("--schema", metavar="NAME", help="PostgreSQL schema holding the tables (storage.schema)")
    p.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS, metavar="N", help="rows per read/row group")
    p.set_defaults(func=cmd_export)

    # kgc http-token: a new operator API principal (servers.http.access): the token once, and the entry to configure.
    p = commands.add_parser("http-token", help="make a token for the operator API and print its [[http.principals]]")
    p.add_argument("name", help="the principal's name (audited as User:NAME)")
    p.add_argument("role", choices=("viewer", "operator", "admin"), help="what it may do")
    p.set_defaults(func=cmd_http_token)
    return parser


def cmd_http_token(args: argparse.Namespace) -> int:
    """Print a random token (give it to the principal; it is not kept) and the TOML entry holding its SHA-256."""
    from servers.http.access import new_token, token_digest

    if not args.name or any(c.isspace() or c == ":" for c in args.name):
        print("kgc http-token: the name may hold neither spaces nor ':'", file=sys.stderr)
        return 2
    token = new_token()
    print(f"# token for User:{args.name} (shown once; the daemon keeps only its SHA-256):")
    print(f"# {token}")
    print("[[http.principals]]")
    print(f'name = "{args.name}"')
    print(f'role = "{args.role}"')
    print(f'token_sha256 = "{token_digest(token)}"')
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from daemon.export import cmd_export as run_export

    return run_export(args)


def settings_from_args(args: argparse.Namespace) -> Settings:
    from broker.topics import parse_topic_spec
    from daemon.settings import listen_override, load_settings, parse_set_options

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
    import asyncio
    import contextlib
    import gc
    import signal

    from daemon.app import App
    from runtime.loop import tune_gc

    app = await App.open(settings)
    # Start-up allocates millions of objects that live as long as the daemon (the groups and 1,000,000 offsets): the
    # collector stays off from here until tune_gc freezes them, once serving. With it on again right after the load,
    # the first collections scanned them three times over (young, middle, full: ~1 s CPU at 1,000,000 offsets) and
    # tune_gc's full collection once more (0.4 s). What the imports and opening left is collected now, heap small.
    gc.collect()
    gc.disable()

    def ready() -> None:
        tune_gc(settings.runtime.gc_gen0_threshold, collect=False)
        gc.enable()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGHUP, app.reload_tls)  # TLS certificate rotation without a restart
    try:
        await app.run_until(stop, on_ready=ready)
    finally:
        gc.enable()


def _run(coro: Any) -> None:
    import asyncio

    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


def cmd_serve(args: argparse.Namespace) -> int:
    import faulthandler
    import logging

    from pydantic import ValidationError

    from daemon.settings import SettingsError
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
    from daemon.listener_settings import ListenerConfigError
    from servers.kafka.tls import TlsConfigError

    try:
        _run(serve(settings))
    except (ListenerConfigError, TlsConfigError) as exc:  # found when the listeners are built
        print(f"kgc: configuration error: {exc}", file=sys.stderr)
        return 2
    except (OSError, StorageError) as exc:
        logging.getLogger("coordinator").error("cannot start: %s", exc)
        return 1
    return 0


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader of the output went away (``kgc groups status g | head -2``): stop quietly, as cat or grep do,
        # with the status of a command ended by SIGPIPE. The rest of the output goes to /dev/null, so that the
        # interpreter's own flush at exit does not fail on the closed pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    # A process of its own (``python -m daemon``): kio registers hypothesis strategies for its types whenever
    # hypothesis can be imported (installed with the test extras), 0.15 s of every start-up for nothing a command
    # uses. Not in main(), which tests call in their own process.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    sys.exit(main())
