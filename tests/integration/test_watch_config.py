"""watch.toml: defaults, both sources and sinks, and errors that name the bad key."""

from __future__ import annotations

import base64
import random
import re
import threading
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from mainframe.clock import FakeClock, rfc3339
from mainframe.watch.command import (
    build_watcher,
    interruptible_sleep,
    open_watch_store,
    run_loop,
    run_watch,
)
from mainframe.watch.config import (
    ConfigError,
    MainframeSourceConfig,
    PrometheusSourceConfig,
    WatchConfig,
    WebhookSinkConfig,
    load_config,
    parse_config,
)
from mainframe.watch.policies import DeliveryPolicy, ObserverPolicy
from mainframe.watch.ports import AlertMessage
from mainframe.watch.retention import WatchRetention
from mainframe.watch.sources import MainframeSource
from mainframe.watch.windows import Window, closed_windows

EXAMPLE = Path(__file__).resolve().parents[2] / "watch.example.toml"
SECRET = "whsec_" + base64.b64encode(b"a-webhook-secret-of-32-bytes-ok!").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"the-previous-secret-32-bytes-ok!").decode()
MINIMAL = """
[source]
type = "mainframe"
url = "http://mf.test"
token = "owner-token"

[[sinks]]
type = "alertmanager"
url = "http://am.test:9093"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "watch.toml"
    path.write_text(text)
    return path


def minimal(**top: Any) -> dict[str, Any]:
    raw: dict[str, Any] = tomllib.loads(MINIMAL)
    raw.update(top)
    return raw


def error_of(raw: dict[str, Any], environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, environ=environ or {})
    return str(caught.value)


def test_a_minimal_file_takes_the_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL), environ={})

    assert config.database_url == "sqlite:///./watch.db"
    assert (config.window_seconds, config.settle_seconds, config.lookback_seconds) == (60, 30, 900)
    assert config.lease_seconds == 300
    assert config.poll_interval_seconds == 15
    assert config.max_attempts == 5
    assert config.resend_interval_seconds == 60
    assert re.fullmatch(r".+-\d+", config.owner)
    assert (config.telemetry.host, config.telemetry.port) == ("127.0.0.1", 9464)
    assert isinstance(config.source, MainframeSourceConfig)
    assert config.source.bearer() == "owner-token"
    assert config.delivery.policy() == DeliveryPolicy("v1", 0.1, 20, 10)
    assert config.observer.policy() == ObserverPolicy("v1", 300, 3, 300)
    assert [sink.name for sink in config.sinks] == ["alertmanager"]
    assert config.retention.policy() == WatchRetention(7 * 86_400_000_000, 30 * 86_400_000_000)


def test_a_retention_is_days_or_never() -> None:
    raw = minimal(retention={"poll_log_days": 0.5, "delivered_outbox_days": "never"})
    policy = parse_config(raw, environ={}).retention.policy()
    assert policy == WatchRetention(43_200_000_000, None)


def test_the_example_parses_and_documents_every_key() -> None:
    config = load_config(EXAMPLE, environ={"MAINFRAME_WATCH_TOKEN": "from-env"})
    assert isinstance(config.source, MainframeSourceConfig)
    assert config.source.bearer() == "from-env"

    text = EXAMPLE.read_text()
    models: list[type[BaseModel]] = [WatchConfig]
    documented = set(re.findall(r"^#?\s*(\w+)\s*=", text, flags=re.MULTILINE))
    seen: set[type[BaseModel]] = set()
    while models:
        model = models.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            sub = [a for a in getattr(field.annotation, "__args__", ()) if isinstance(a, type)]
            nested = [t for t in (field.annotation, *sub) if isinstance(t, type)]
            children = [t for t in nested if issubclass(t, BaseModel)]
            if children:
                models.extend(children)
                continue
            if name in {"source", "sources", "sinks"}:
                continue
            assert name in documented, f"{model.__name__}.{name} is not in watch.example.toml"


def test_the_example_documents_each_source_and_sink_type() -> None:
    text = EXAMPLE.read_text()
    for table in ("source", "delivery", "observer", "telemetry", "retention", "sources.eu-west"):
        assert f"[{table}]" in text
    for kind in ("mainframe", "prometheus", "alertmanager", "webhook"):
        assert f'type = "{kind}"' in text
    tables = {"delivery", "observer", "sinks"}  # a source's own tables, shown as such
    for key in (
        MainframeSourceConfig.model_fields | PrometheusSourceConfig.model_fields
    ).keys() - tables:
        assert re.search(rf"^#?\s*{key}\s*=", text, flags=re.MULTILINE), key
    for key in WebhookSinkConfig.model_fields:
        assert re.search(rf"^#?\s*{key}\s*=", text, flags=re.MULTILINE), key


def test_a_prometheus_source_and_a_webhook_sink() -> None:
    raw = {
        "window_seconds": 30,
        "lookback_seconds": 300,
        "settle_seconds": 15,
        "source": {
            "type": "prometheus",
            "url": "http://prom.test:9090",
            "attempts_query": "sum(increase(a[30s]))",
            "failures_query": "sum(increase(f[30s]))",
        },
        "sinks": [
            {"type": "webhook", "url": "https://hooks.test/", "secrets": [SECRET, OLD_SECRET]},
            {"type": "alertmanager", "url": "http://am.test", "labels": {"team": "notify"}},
        ],
    }
    config = parse_config(raw, environ={})
    assert isinstance(config.source, PrometheusSourceConfig)
    assert config.source.bearer() is None
    webhook = config.sinks[0]
    assert isinstance(webhook, WebhookSinkConfig)
    assert webhook.secret_values() == [SECRET, OLD_SECRET]
    assert SECRET not in repr(config)


def test_secrets_and_tokens_can_come_from_the_environment() -> None:
    raw = minimal(
        source={"type": "mainframe", "url": "http://mf.test", "token_env": "MF_TOKEN"},
        sinks=[{"type": "webhook", "url": "https://h.test", "secret_env": "HOOK_SECRETS"}],
    )
    config = parse_config(
        raw, environ={"MF_TOKEN": "t0k", "HOOK_SECRETS": f"{SECRET} {OLD_SECRET}"}
    )
    assert isinstance(config.source, MainframeSourceConfig)
    assert config.source.bearer() == "t0k"
    sink = config.sinks[0]
    assert isinstance(sink, WebhookSinkConfig)
    assert sink.secret_values() == [SECRET, OLD_SECRET]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (minimal(windw_seconds=60), "windw_seconds: unknown key"),
        (minimal(window_seconds="sixty"), "window_seconds: "),
        (minimal(window_seconds=0), "window_seconds: "),
        (minimal(window_seconds=90), "whole number of minutes"),
        (minimal(lookback_seconds=30), "lookback_seconds must be at least window_seconds"),
        (minimal(lease_seconds=-1), "lease_seconds: "),
        (minimal(database_url="mysql://x"), "database_url: must start with sqlite://"),
        (minimal(log_level="loud"), "log_level: "),
        (minimal(source=None), "source: "),
        ({"sinks": minimal()["sinks"]}, "source: required key is missing"),
        (minimal(sinks=[]), "sinks: required key is missing"),
        ({"source": minimal()["source"]}, "sinks: required key is missing"),
        (
            minimal(source={"type": "graphite", "url": "http://g"}),
            "source: type must be one of 'mainframe', 'prometheus' (got 'graphite')",
        ),
        (minimal(source={"url": "http://g"}), "source: type is required"),
        (minimal(source={"type": "mainframe", "url": "http://mf"}), "token or token_env"),
        (minimal(source={"type": "mainframe", "token": "t"}), "source.url: required key"),
        (
            minimal(source={"type": "mainframe", "url": "mf.test", "token": "t"}),
            "source.url: must be an http:// or https:// URL",
        ),
        (
            minimal(source={"type": "mainframe", "url": "http://m", "token": "t", "tokn": 1}),
            "source.tokn: unknown key",
        ),
        (
            minimal(
                source={"type": "mainframe", "url": "http://m", "token": "t", "token_env": "X"}
            ),
            "not both",
        ),
        (
            minimal(source={"type": "mainframe", "url": "http://m", "token_env": "NOT_SET"}),
            "environment variable NOT_SET is not set",
        ),
        (
            minimal(source={"type": "prometheus", "url": "http://p", "attempts_query": "a"}),
            "source.failures_query: required key is missing",
        ),
        (minimal(delivery={"ratio": 1.5}), "delivery.ratio: "),
        (minimal(delivery={"min_attempts": 0}), "delivery.min_attempts: "),
        (minimal(delivery={"version": "has space"}), "delivery.version: "),
        (minimal(delivery={"thresold": 3}), "delivery.thresold: unknown key"),
        (minimal(observer={"max_checkpoint_age_seconds": 60}), "max_checkpoint_age_seconds"),
        (minimal(observer={"max_throttle_exhaustions": 0}), "observer.max_throttle_exhaustions"),
        (minimal(telemetry={"port": 70000}), "telemetry.port: "),
        (
            minimal(sinks=[{"type": "pagerduty", "url": "http://p"}]),
            "sinks[0]: type must be one of 'alertmanager', 'webhook'",
        ),
        (minimal(sinks=[{"type": "alertmanager"}]), "sinks[0].url: required key is missing"),
        (
            minimal(sinks=[{"type": "alertmanager", "url": "http://a", "labels": {"a-b": "x"}}]),
            "sinks[0].labels: label name 'a-b'",
        ),
        (
            minimal(
                sinks=[
                    {"type": "alertmanager", "url": "http://a"},
                    {"type": "alertmanager", "url": "http://b"},
                ]
            ),
            "two sinks are named 'alertmanager'",
        ),
        (
            minimal(
                sinks=[
                    {"type": "alertmanager", "url": "http://a"},
                    {"type": "webhook", "url": "http://h"},
                ]
            ),
            "sinks[1]: give exactly one of secrets or secret_env",
        ),
        (
            minimal(sinks=[{"type": "webhook", "url": "http://h", "secrets": ["plain"]}]),
            "sinks[0]: a webhook secret starts with 'whsec_'",
        ),
        (
            minimal(sinks=[{"type": "webhook", "url": "http://h", "secrets": [SECRET] * 3}]),
            "sinks[0]: give one secret, or two during a rotation",
        ),
        (
            minimal(sinks=[{"type": "webhook", "url": "http://h", "secret_env": "NONE"}]),
            "sinks[0]: environment variable NONE is not set",
        ),
        (
            minimal(retention={"poll_log_days": -1}),
            "retention.poll_log_days: give between 0 and 36500 days, or 'never'",
        ),
        (
            minimal(retention={"delivered_outbox_days": "forever"}),
            "retention.delivered_outbox_days: give a number of days or 'never'",
        ),
    ],
)
def test_errors_name_the_bad_key(raw: dict[str, Any], expected: str) -> None:
    message = error_of(raw)
    assert message.startswith("watch.toml: ")
    assert expected in message, message


def test_a_file_that_is_not_toml_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "window_seconds = \n")
    with pytest.raises(ConfigError, match=r"watch\.toml: not valid TOML: .*line 1"):
        load_config(path, environ={})


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml", environ={})


# --- from configuration to a running watcher ----------------------------------------------


class RecordingSink:
    name = "recorder"

    def __init__(self) -> None:
        self.messages: list[AlertMessage] = []

    def deliver(self, message: AlertMessage) -> None:
        self.messages.append(message)


def test_a_configured_watcher_polls_alerts_and_stops(tmp_path: Path) -> None:
    config = parse_config(minimal(database_url=f"sqlite:///{tmp_path / 'watch.db'}"), environ={})
    clock = FakeClock()
    asked: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.params["start"])
        window = Window.from_key(request.url.params["start"] + "/60s")
        body = {
            "start": rfc3339(window.start_us),
            "end": rfc3339(window.end_us),
            "attempts": 40,
            "failures": 30,
            "complete": True,
        }
        return httpx.Response(200, json=body)

    source = MainframeSource(
        "http://mf.test", "t", client=httpx.Client(transport=httpx.MockTransport(handle))
    )
    sink = RecordingSink()
    watcher = build_watcher(
        config, sleep=lambda _: None, clock=clock, rng=random.Random(7), source=source, sinks=[sink]
    )
    try:
        code = run_loop(watcher, stop=threading.Event(), interval_s=0, once=True)
        assert code == 0
        assert len(asked) == config.lookback_seconds // config.window_seconds
        firing = [m for m in sink.messages if m.firing]
        assert [m.alert for m in firing] == ["delivery_failure"]
        newest = watcher.store.checkpoint()
        assert newest is not None
        sample = watcher.telemetry.registry.get_sample_value
        named = {"source": "default"}  # a single [source] table is the source named default
        checkpoint = "mainframe_watch_newest_completed_window_timestamp_seconds"
        assert sample(checkpoint, named) == newest / 1e6
        assert sample("mainframe_watch_polls_total", named | {"class": "complete"})
        assert sample("mainframe_watch_incomplete_windows", named) == 0
        delivered = {"sink": "recorder", "outcome": "delivered"}
        assert sample("mainframe_watch_alert_deliveries_total", delivered) == len(sink.messages)

        # A second pass finds every window done: nothing is polled or sent again.
        before = len(sink.messages)
        stop = threading.Event()
        stop.set()
        assert run_loop(watcher, stop=stop, interval_s=0, once=False) == 0
        watcher.engine.tick()
        watcher.relay.run_once()
        assert len(asked) == 15
        assert [m for m in sink.messages[before:] if m.alert == "delivery_failure"] == []
    finally:
        watcher.close()


def test_run_watch_stops_at_a_bad_file_with_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, MINIMAL + "\nbogus = 1\n")
    assert run_watch(path, once=True) == 2
    assert "bogus: unknown key" in capsys.readouterr().err


def test_run_watch_refuses_a_database_it_cannot_open_with_exit_code_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The file is fine; the database is not there to be used: refused, as for every command.
    missing = tmp_path / "no-such-dir" / "w.db"
    path = write(tmp_path, f'database_url = "sqlite:///{missing}"\n' + MINIMAL)
    assert run_watch(path, once=True) == 1
    assert "database_url: cannot open" in capsys.readouterr().err


def test_run_watch_once_survives_an_unreachable_source_and_sink(tmp_path: Path) -> None:
    # Port 1 on loopback refuses at once: transport errors, classified and recorded.
    text = MINIMAL.replace("http://mf.test", "http://127.0.0.1:1").replace(
        "http://am.test:9093", "http://127.0.0.1:1"
    )
    path = write(tmp_path, f'database_url = "sqlite:///{tmp_path / "w.db"}"\n' + text)
    assert run_watch(path, once=True) == 0
    store = open_watch_store(f"sqlite:///{tmp_path / 'w.db'}")
    try:
        assert store.checkpoint() is None, "a transport error never completes a window"
        assert store.completed_keys(since_us=0) == set()
        # A watcher that has only just started is not yet stale: nothing to announce.
        assert [item for item in store.outbox() if item.message.alert.startswith("obs")] == []
    finally:
        store.engine.dispose()


def test_a_stop_during_backoff_ends_the_tick_and_releases_the_lease(tmp_path: Path) -> None:
    config = parse_config(
        minimal(database_url=f"sqlite:///{tmp_path / 'watch.db'}", lookback_seconds=60),
        environ={},
    )
    stop = threading.Event()

    def handle(request: httpx.Request) -> httpx.Response:
        stop.set()  # SIGTERM arrives while the watcher is being throttled
        return httpx.Response(429, headers={"Retry-After": "30"})

    source = MainframeSource(
        "http://mf.test", "t", client=httpx.Client(transport=httpx.MockTransport(handle))
    )
    watcher = build_watcher(
        config,
        sleep=interruptible_sleep(stop),
        clock=FakeClock(),
        source=source,
        sinks=[RecordingSink()],
    )
    try:
        assert run_loop(watcher, stop=threading.Event(), interval_s=0, once=False) == 0
        (window,) = closed_windows(
            now_us=FakeClock().now_us(), length_s=60, settle_s=30, lookback_s=60
        )
        record = watcher.store.window(window.key)
        assert record is not None
        assert record.lease_owner is None
        assert watcher.store.checkpoint() is None
    finally:
        watcher.close()


SOURCES = """
window_seconds = 60
[sources.eu-west]
type = "mainframe"
url = "http://eu.test"
token = "eu-token"
requests_per_second = 2.5
burst = 4
max_concurrency = 2

[sources."us.east_1"]
type = "prometheus"
url = "http://prom.us.test:9090"
attempts_query = "a"
failures_query = "f"
window_seconds = 30
lookback_seconds = 300
[sources."us.east_1".delivery]
ratio = 0.05
[[sources."us.east_1".sinks]]
type = "alertmanager"
name = "am-us"
url = "http://am.us.test:9093"

[[sinks]]
type = "alertmanager"
url = "http://am.test:9093"
"""


def test_sources_by_name_take_their_own_settings_or_the_top_level_ones(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, SOURCES), environ={})
    eu, us = config.plans()
    assert (eu.name, us.name) == ("eu-west", "us.east_1")
    assert eu.quota.requests_per_second == 2.5 and eu.quota.burst == 4
    assert eu.quota.max_concurrency == 2
    assert us.quota.requests_per_second is None and us.quota.max_concurrency is None
    assert (eu.window_seconds, us.window_seconds, us.lookback_seconds) == (60, 30, 300)
    assert eu.delivery.ratio == 0.1 and us.delivery.ratio == 0.05
    assert [s.name for s in eu.sinks] == ["alertmanager"] and not eu.own_sinks
    assert [s.name for s in us.sinks] == ["am-us"] and us.own_sinks
    [single] = load_config(write(tmp_path, MINIMAL), environ={}).plans()
    assert single.name == "default", "a single [source] is the source named default"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {**minimal(), "sources": {"eu": minimal()["source"]}},
            "give one [source] table or [sources.NAME] tables, not both",
        ),
        ({"sources": {}, "sinks": minimal()["sinks"]}, "source: required key is missing"),
        (
            {"sources": {"eu west": minimal()["source"]}, "sinks": minimal()["sinks"]},
            "sources.eu west: a source's name is 1 to 64 letters, digits, '.', '_' or '-'",
        ),
        (
            {"sources": {"x" * 65: minimal()["source"]}, "sinks": minimal()["sinks"]},
            f"sources.{'x' * 65}: a source's name is 1 to 64",
        ),
        (
            {"sources": {"eu": minimal()["source"] | {"url": "eu.test"}}, "sinks": []},
            "sources.eu.url: must be an http:// or https:// URL",
        ),
        (
            {"sources": {"eu": minimal()["source"]}},
            "sources.eu.sinks: required key is missing (and there are no top-level [[sinks]])",
        ),
        (
            {"sources": {"eu": minimal()["source"] | {"window_seconds": 30}}, **minimal()},
            "give one [source]",
        ),
        (
            {"sources": {"eu": minimal()["source"] | {"requests_per_second": 0}}},
            "sources.eu.requests_per_second: Input should be greater than 0",
        ),
    ],
)
def test_a_bad_source_table_names_its_key(raw: dict[str, Any], message: str) -> None:
    assert message in error_of(raw)


def test_a_named_source_with_a_window_its_type_cannot_serve_is_refused() -> None:
    eu = minimal()["source"] | {"window_seconds": 30, "lookback_seconds": 300}
    raw = {"sources": {"eu": eu}, "sinks": minimal()["sinks"]}
    assert "sources.eu.window_seconds must be a whole number of minutes" in error_of(raw)


def test_watch_serves_only_the_sources_named_and_refuses_an_unknown_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, f'database_url = "sqlite:///{tmp_path / "w.db"}"\n' + SOURCES)
    assert run_watch(path, once=True, only=["nowhere"]) == 2
    assert "--source nowhere: no such source (the file has: eu-west, us.east_1)" in (
        capsys.readouterr().err
    )
    config = load_config(path, environ={})
    watcher = build_watcher(config, sleep=lambda _: None, only=["us.east_1"])
    try:
        assert [engine.name for engine in watcher.engines] == ["us.east_1"]
        assert watcher.relay.sinks_of("us.east_1")[0].name == "am-us"
    finally:
        watcher.close()
