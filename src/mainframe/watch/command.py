"""`mainframe watch`: build the watcher from its configuration and run it, one tick (evaluate
due windows) and one relay pass (deliver the outbox) every poll interval, until SIGTERM or
SIGINT. Everything it decides lives in the engine, the relay and the policies; this only
wires them to real I/O and reports progress in the log."""

from __future__ import annotations

import contextlib
import random
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from mainframe import logs
from mainframe.clock import Clock, SystemClock
from mainframe.parsers import redact_url
from mainframe.watch.config import (
    AlertmanagerSinkConfig,
    ConfigError,
    MainframeSourceConfig,
    WatchConfig,
    load_config,
)
from mainframe.watch.database import create_watch_engine
from mainframe.watch.engine import Engine, TickReport
from mainframe.watch.migrate import upgrade
from mainframe.watch.ports import Sink, Source
from mainframe.watch.relay import Relay
from mainframe.watch.sinks import AlertmanagerSink, WebhookSink
from mainframe.watch.sources import MainframeSource, PrometheusSource
from mainframe.watch.state import WatchStore
from mainframe.watch.telemetry import PrometheusTelemetry

EXIT_OK = 0
EXIT_FAILED = 1  # --once: the tick or the relay pass raised
EXIT_CONFIG = 2  # the configuration or the database is unusable


class WatchStopped(BaseException):
    """Raised out of a backoff sleep when a stop was asked for. A BaseException, so no
    `except Exception` on the way swallows it; the engine releases its lease on the way out."""


@dataclass
class Watcher:
    """The wired watcher and what must be closed after it."""

    store: WatchStore
    engine: Engine
    relay: Relay
    telemetry: PrometheusTelemetry
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in self.closers:
            close()


def build_source(config: WatchConfig) -> MainframeSource | PrometheusSource:
    src = config.source
    if isinstance(src, MainframeSourceConfig):
        token = src.bearer()
        assert token is not None  # the config requires one
        return MainframeSource(src.url, token, timeout=src.timeout_seconds)
    return PrometheusSource(
        src.url,
        src.attempts_query,
        src.failures_query,
        timeout=src.timeout_seconds,
        token=src.bearer(),
    )


def build_sinks(config: WatchConfig, *, clock: Clock) -> list[AlertmanagerSink | WebhookSink]:
    sinks: list[AlertmanagerSink | WebhookSink] = []
    for sink in config.sinks:
        if isinstance(sink, AlertmanagerSinkConfig):
            sinks.append(
                AlertmanagerSink(
                    sink.url,
                    extra_labels=sink.labels,
                    generator_url=sink.generator_url,
                    name=sink.name,
                    clock=clock,
                    timeout=sink.timeout_seconds,
                )
            )
        else:
            sinks.append(
                WebhookSink(
                    sink.url,
                    sink.secret_values(),
                    name=sink.name,
                    clock=clock,
                    timeout=sink.timeout_seconds,
                )
            )
    return sinks


def open_watch_store(url: str) -> WatchStore:
    """A store whose tables are at the watcher's head revision: its own migration chain runs
    here, on SQLite and PostgreSQL alike (several watchers starting together take turns)."""
    engine = create_watch_engine(url)
    try:
        upgrade(engine)
    except Exception as exc:  # unreachable or unreadable database
        engine.dispose()
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ConfigError(
            f"database_url: cannot open {redact_url(url)}: {exc.__class__.__name__}: {first}"
        ) from exc
    return WatchStore(engine)


def build_watcher(
    config: WatchConfig,
    *,
    sleep: Callable[[float], None],
    clock: Clock | None = None,
    rng: random.Random | None = None,
    source: Source | None = None,
    sinks: list[Sink] | None = None,
) -> Watcher:
    """Wire store, source, sinks, engine, relay and telemetry from `config`; tests pass
    their own clock, random source, source and sinks."""
    clock = clock or SystemClock()
    store = open_watch_store(config.database_url)
    closers: list[Callable[[], None]] = [store.engine.dispose]
    if source is None:
        built_source = build_source(config)
        closers.append(built_source.close)
        source = built_source
    if sinks is None:
        built_sinks = build_sinks(config, clock=clock)
        closers.extend(sink.close for sink in built_sinks)
        sinks = list(built_sinks)
    telemetry = PrometheusTelemetry(sources=[source.name], sinks=[s.name for s in sinks])
    telemetry.checkpoint(store.checkpoint())
    engine = Engine(
        store,
        source,
        config.delivery.policy(),
        config.observer.policy(),
        window_s=config.window_seconds,
        settle_s=config.settle_seconds,
        lookback_s=config.lookback_seconds,
        owner=config.owner,
        lease_s=config.lease_seconds,
        clock=clock,
        sleep=sleep,
        rng=rng or random.Random(),
        telemetry=telemetry,
        max_attempts=config.max_attempts,
        retention=config.retention.policy(),
    )
    relay = Relay(
        store,
        sinks,
        clock=clock,
        resend_interval_s=config.resend_interval_seconds,
        telemetry=telemetry,
    )
    return Watcher(store, engine, relay, telemetry, closers)


def run_watch(config_path: Path, *, once: bool = False) -> int:
    """Run the watcher configured by `config_path` until SIGTERM/SIGINT (or for one tick
    with `once`). Returns the process exit code."""
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        print(f"mainframe watch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    logs.configure(level=config.log_level)
    log = logs.get_logger("mainframe.watch")
    stop = threading.Event()
    try:
        watcher = build_watcher(config, sleep=interruptible_sleep(stop))
    except ConfigError as exc:
        log.error("watch_config_invalid", error=str(exc))
        return EXIT_CONFIG
    with _stop_on_signals(stop), contextlib.ExitStack() as cleanup:
        cleanup.callback(watcher.close)
        if not once and config.telemetry.port:
            server = watcher.telemetry.serve(config.telemetry.host, config.telemetry.port)
            cleanup.callback(server.stop)
        log.info(
            "watch_started",
            owner=config.owner,
            source=watcher.engine.source.name,
            sinks=[sink.name for sink in watcher.relay.sinks],
            window_seconds=config.window_seconds,
            telemetry=None if once or not config.telemetry.port else config.telemetry.port,
            once=once,
        )
        code = run_loop(watcher, stop=stop, interval_s=config.poll_interval_seconds, once=once)
    return code


def run_loop(watcher: Watcher, *, stop: threading.Event, interval_s: float, once: bool) -> int:
    """Tick, relay, publish the shared checkpoint; wait; repeat until `stop` is set."""
    log = logs.get_logger("mainframe.watch")
    while not stop.is_set():
        try:
            report = watcher.engine.tick()
            delivered = watcher.relay.run_once()
            watcher.telemetry.checkpoint(watcher.store.checkpoint())
        except WatchStopped:
            break
        except Exception as exc:  # a database or sink hiccup: the next tick retries
            log.error("watch_tick_failed", error=f"{exc.__class__.__name__}: {exc}")
            if once:
                return EXIT_FAILED
        else:
            log_tick(log, report, delivered)
        if once or stop.wait(interval_s):
            break
    log.info("watch_stopped", owner=watcher.engine.owner)
    return EXIT_OK


def log_tick(log: Any, report: TickReport, delivered: int) -> None:
    for message in report.transitions:
        log.warning(
            "watch_alert_changed",
            alert=message.alert,
            state="firing" if message.firing else "resolved",
            window=message.window_key,
            policy_version=message.policy_version,
        )
    busy = report.polls or report.failed or report.lost or delivered or report.pruned
    emit = log.info if busy else log.debug
    emit(
        "watch_tick",
        polls=report.polls,
        completed=report.completed,
        failed={key: poll_class.value for key, poll_class in report.failed.items()},
        skipped=len(report.skipped),
        lost=report.lost,
        stopped=None if report.stopped is None else report.stopped.value,
        firing=sorted(name for name, firing in report.observer.items() if firing),
        delivered=delivered,
        pruned=report.pruned,
    )


def interruptible_sleep(stop: threading.Event) -> Callable[[float], None]:
    """A sleep for the engine's backoff that ends early, raising WatchStopped, on a stop."""

    def sleep(seconds: float) -> None:
        if stop.wait(seconds):
            raise WatchStopped

    return sleep


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop` (a second one acts as usual); handlers are restored
    after. Signals can only be handled in the main thread: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        sig: signal.getsignal(sig) or signal.SIG_DFL for sig in (signal.SIGTERM, signal.SIGINT)
    }

    def handle(signum: int, _frame: FrameType | None) -> None:
        stop.set()
        signal.signal(signum, previous[signal.Signals(signum)])

    for sig in previous:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
