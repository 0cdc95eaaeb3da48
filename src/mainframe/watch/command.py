"""`mainframe watch`: build the watcher from its configuration and run it until SIGTERM or
SIGINT: every source ticks (evaluates its due windows) every poll interval in a thread of its
own, and the outbox is relayed (delivered) every poll interval. Everything it decides lives
in the engine, the relay and the policies; this only wires them to real I/O and reports
progress in the log."""

from __future__ import annotations

import contextlib
import random
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    SinkConfig,
    SourcePlan,
    WatchConfig,
    load_config,
)
from mainframe.watch.database import create_watch_engine
from mainframe.watch.engine import Engine, TickReport
from mainframe.watch.migrate import upgrade
from mainframe.watch.ports import Sink, Source
from mainframe.watch.quota import MAX_NOT_BEFORE_S
from mainframe.watch.relay import Relay
from mainframe.watch.sinks import AlertmanagerSink, WebhookSink
from mainframe.watch.sources import MainframeSource, PrometheusSource
from mainframe.watch.state import WatchStore
from mainframe.watch.telemetry import PrometheusTelemetry

# The exit statuses of every `mainframe` command (README.md, "Exit status"); the watcher
# imports nothing of the CLI, so they are restated here.
EXIT_OK = 0
EXIT_FAILED = 1  # --once: the tick or the relay pass raised; or the database cannot be used
EXIT_CONFIG = 2  # the configuration file or --source cannot be used as given


class DatabaseUnusable(ConfigError):
    """The watcher's database cannot be opened or upgraded: unreachable, or refusing."""


class WatchStopped(BaseException):
    """Raised out of a backoff sleep when a stop was asked for. A BaseException, so no
    `except Exception` on the way swallows it; the engine releases its lease on the way out."""


@dataclass
class Watcher:
    """The wired watcher, one engine per source it serves, and what must be closed after it."""

    store: WatchStore
    engines: list[Engine]
    relay: Relay
    telemetry: PrometheusTelemetry
    closers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def engine(self) -> Engine:
        """The engine of a watcher that serves one source."""
        (only,) = self.engines
        return only

    def close(self) -> None:
        for close in self.closers:
            close()


def build_source(plan: SourcePlan) -> MainframeSource | PrometheusSource:
    src = plan.source
    if isinstance(src, MainframeSourceConfig):
        token = src.bearer()
        assert token is not None  # the config requires one
        return MainframeSource(src.url, token, name=plan.name, timeout=src.timeout_seconds)
    return PrometheusSource(
        src.url,
        src.attempts_query,
        src.failures_query,
        name=plan.name,
        timeout=src.timeout_seconds,
        token=src.bearer(),
    )


def build_sinks(configs: Sequence[SinkConfig], *, clock: Clock) -> list[Sink]:
    sinks: list[Sink] = []
    for sink in configs:
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


def open_watch_store(url: str, *, clock: Clock | None = None) -> WatchStore:
    """A store whose tables are at the watcher's head revision: its own migration chain runs
    here, on SQLite and PostgreSQL alike (several watchers starting together take turns)."""
    engine = create_watch_engine(url)
    try:
        upgrade(engine)
    except Exception as exc:  # unreachable or unreadable database
        engine.dispose()
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise DatabaseUnusable(
            f"database_url: cannot open {redact_url(url)}: {exc.__class__.__name__}: {first}"
        ) from exc
    return WatchStore(engine, clock=clock)


def chosen_plans(config: WatchConfig, only: Sequence[str]) -> list[SourcePlan]:
    """The sources named by `--source` (every one when none is named), in the file's order."""
    plans = config.plans()
    unknown = sorted(set(only) - {plan.name for plan in plans})
    if unknown:
        known = ", ".join(plan.name for plan in plans)
        raise ConfigError(f"--source {unknown[0]}: no such source (the file has: {known})")
    return [plan for plan in plans if not only or plan.name in only]


def build_watcher(
    config: WatchConfig,
    *,
    sleep: Callable[[float], None],
    clock: Clock | None = None,
    rng: random.Random | None = None,
    source: Source | None = None,
    sinks: list[Sink] | None = None,
    sources: Mapping[str, Source] | None = None,
    only: Sequence[str] = (),
) -> Watcher:
    """Wire store, sources, sinks, engines, relay and telemetry from `config`; tests pass
    their own clock (which the shared quota then keeps time by too, instead of the
    database's), random source, sources (by name, or `source` for a file's only one) and
    sinks (every source's)."""
    plans = chosen_plans(config, only)
    store = open_watch_store(config.database_url, clock=clock)
    clock = clock or SystemClock()
    closers: list[Callable[[], None]] = [store.engine.dispose]
    given = dict(sources or {})
    if source is not None:
        given[plans[0].name] = source
    shared = _sinks(config.sinks, sinks, clock, closers)
    routes = {
        plan.name: _sinks(plan.sinks, sinks, clock, closers) for plan in plans if plan.own_sinks
    }
    every_sink = {sink.name for sink in [*shared, *(s for r in routes.values() for s in r)]}
    names = [plan.name for plan in plans]
    telemetry = PrometheusTelemetry(sources=names, sinks=sorted(every_sink))
    engines = []
    for plan in plans:
        polled = given.get(plan.name) or _built(plan, closers)
        bound = store.for_source(plan.name)
        telemetry.checkpoint(plan.name, bound.checkpoint())
        engines.append(
            Engine(
                bound,
                polled,
                plan.delivery.policy(),
                plan.observer.policy(),
                window_s=plan.window_seconds,
                settle_s=plan.settle_seconds,
                lookback_s=plan.lookback_seconds,
                owner=config.owner,
                lease_s=config.lease_seconds,
                clock=clock,
                sleep=sleep,
                rng=rng or random.Random(),
                telemetry=telemetry,
                max_attempts=config.max_attempts,
                retention=config.retention.policy(),
                quota=plan.quota,
            )
        )
    relay = Relay(
        store,
        shared,
        clock=clock,
        resend_interval_s=config.resend_interval_seconds,
        telemetry=telemetry,
        routes=routes,
        sources=names,
    )
    return Watcher(store, engines, relay, telemetry, closers)


def _built(plan: SourcePlan, closers: list[Callable[[], None]]) -> Source:
    built = build_source(plan)
    closers.append(built.close)
    return built


def _sinks(
    configs: Sequence[SinkConfig],
    given: list[Sink] | None,
    clock: Clock,
    closers: list[Callable[[], None]],
) -> list[Sink]:
    if given is not None:
        return list(given)
    built = build_sinks(configs, clock=clock)
    closers.extend(sink.close for sink in built)  # type: ignore[attr-defined]
    return built


def run_watch(config_path: Path, *, once: bool = False, only: Sequence[str] = ()) -> int:
    """Run the watcher configured by `config_path` until SIGTERM/SIGINT (or for one tick
    with `once`), for every source or those in `only`. Returns the process exit code."""
    try:
        config = load_config(config_path)
        chosen_plans(config, only)
    except ConfigError as exc:
        print(f"mainframe watch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    logs.configure(level=config.log_level)
    log = logs.get_logger("mainframe.watch")
    stop = threading.Event()
    try:
        watcher = build_watcher(config, sleep=interruptible_sleep(stop), only=only)
    except ConfigError as exc:
        log.error("watch_config_invalid", error=str(exc))
        return EXIT_FAILED if isinstance(exc, DatabaseUnusable) else EXIT_CONFIG
    with _stop_on_signals(stop), contextlib.ExitStack() as cleanup:
        cleanup.callback(watcher.close)
        if not once and config.telemetry.port:
            server = watcher.telemetry.serve(config.telemetry.host, config.telemetry.port)
            cleanup.callback(server.stop)
        log.info(
            "watch_started",
            owner=config.owner,
            sources=[engine.name for engine in watcher.engines],
            sinks=sorted({sink.name for sink in _every_sink(watcher.relay)}),
            telemetry=None if once or not config.telemetry.port else config.telemetry.port,
            once=once,
        )
        code = run_loop(watcher, stop=stop, interval_s=config.poll_interval_seconds, once=once)
    return code


def _every_sink(relay: Relay) -> list[Sink]:
    return [*relay.sinks, *(sink for routed in relay.routes.values() for sink in routed)]


def run_loop(watcher: Watcher, *, stop: threading.Event, interval_s: float, once: bool) -> int:
    """Each source ticks in a thread of its own, so one source's waits and failures never
    delay another; this thread relays the outbox and publishes the shared checkpoints. With
    `once`, every source ticks once (side by side) and then the outbox is relayed once."""
    log = logs.get_logger("mainframe.watch")
    failed = threading.Event()
    loops = [
        threading.Thread(
            target=_source_loop,
            args=(watcher, engine, stop, failed, interval_s, once),
            name=f"watch-{engine.name}",
            daemon=True,
        )
        for engine in watcher.engines
    ]
    for loop in loops:
        loop.start()
    if once:
        for loop in loops:
            loop.join()
    while not (stop.is_set() if not once else failed.is_set()):
        if not _relay_pass(watcher, log) and once:
            failed.set()
        if once or stop.wait(interval_s):
            break
    stop.set()
    for loop in loops:
        loop.join()
    log.info("watch_stopped", owner=_owner(watcher))
    return EXIT_FAILED if failed.is_set() else EXIT_OK


def _relay_pass(watcher: Watcher, log: Any) -> bool:
    """Deliver the outbox and publish every source's shared checkpoint; False if it raised."""
    try:
        delivered = watcher.relay.run_once()
        for engine in watcher.engines:
            watcher.telemetry.checkpoint(engine.name, engine.store.checkpoint())
    except Exception as exc:  # a database or sink hiccup: the next pass retries
        log.error("watch_relay_failed", error=f"{exc.__class__.__name__}: {exc}")
        return False
    if delivered:
        log.info("watch_relayed", delivered=delivered)
    return True


def _owner(watcher: Watcher) -> str:
    return watcher.engines[0].owner if watcher.engines else ""


def _source_loop(
    watcher: Watcher,
    engine: Engine,
    stop: threading.Event,
    failed: threading.Event,
    interval_s: float,
    once: bool,
) -> None:
    """Tick one source until `stop` (once, with `once`); a stop asked mid-wait stops all."""
    log = logs.get_logger("mainframe.watch").bind(source=engine.name)
    while not stop.is_set():
        try:
            report = engine.tick()
        except WatchStopped:
            stop.set()
            return
        except Exception as exc:  # a database or source hiccup: the next tick retries
            log.error("watch_tick_failed", error=f"{exc.__class__.__name__}: {exc}")
            if once:
                failed.set()
                return
        else:
            log_tick(log, report)
        if once or stop.wait(interval_s):
            return


def log_tick(log: Any, report: TickReport) -> None:
    for message in report.transitions:
        log.warning(
            "watch_alert_changed",
            alert=message.alert,
            state="firing" if message.firing else "resolved",
            window=message.window_key,
            policy_version=message.policy_version,
        )
    for asked in report.bounded_retry_after:
        log.warning(
            "watch_retry_after_bounded", asked_seconds=asked, bound_seconds=MAX_NOT_BEFORE_S
        )
    busy = report.polls or report.failed or report.lost or report.pruned or report.quota_waits
    emit = log.info if busy else log.debug
    emit(
        "watch_tick",
        polls=report.polls,
        completed=report.completed,
        failed={key: poll_class.value for key, poll_class in report.failed.items()},
        skipped=len(report.skipped),
        lost=report.lost,
        stopped=None if report.stopped is None else report.stopped.value,
        held=report.held,
        quota_waits=report.quota_waits,
        firing=sorted(name for name, firing in report.observer.items() if firing),
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
