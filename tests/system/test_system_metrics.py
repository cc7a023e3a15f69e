"""/metrics of the split topology with real processes: each gateway worker serves its own on
the metrics port plus its index; the engine process serves its own on its admin listener."""

from __future__ import annotations

import signal
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support import ServerProcess, nats_unreachable, start_engine, start_gateway
from tradehall.client import Client
from tradehall.datadir import DataDir


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free loopback ports (probed, then released)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first: int = probe.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise RuntimeError("no consecutive free ports")


def scrape(url: str, token: str | None = None) -> dict[str, float]:
    """``name{labels}`` -> value, read with the library's parser."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=5) as answer:
        text = answer.read().decode()
    return {
        s.name + repr(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def ready(url: str, timeout: float = 20.0) -> dict[str, float]:
    """``scrape(url)`` once the worker serving it has started."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return scrape(url)
        except OSError:
            assert time.monotonic() < deadline, f"nothing serves {url}"
            time.sleep(0.05)


@pytest.fixture
def stopped() -> Iterator[list[ServerProcess]]:
    processes: list[ServerProcess] = []
    yield processes
    for process in processes:
        process.stop(signal.SIGKILL)


def test_gateway_workers_and_the_engine_serve_their_metrics(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    subject = f"test-{uuid.uuid4().hex}"
    engine = start_engine(tmp_path / "data", subject, "--demo")
    stopped.append(engine)
    port = free_ports(2)
    gateway = start_gateway(subject, "--metrics-port", str(port), workers=2)
    stopped.append(gateway)
    token = DataDir(engine.data_dir).read_token()
    assert token is not None and engine.demo is not None

    order = "tradehall_http_requests_total" + repr(
        sorted({"endpoint": "/spot/open/sapi/v1/order", "method": "POST", "code": "200"}.items())
    )
    placed = "tradehall_engine_commands_total" + repr(
        sorted({"kind": "PlaceOrder", "outcome": "applied"}.items())
    )
    workers = [f"http://127.0.0.1:{port + i}/metrics" for i in range(2)]
    before = [ready(url) for url in workers]  # the gateway answered: one worker at least
    engine_before = scrape(engine.url + "/metrics", token)
    client = Client(gateway.url, engine.demo["apiKey"], engine.demo["secret"], timeout=15)
    for i in range(4):
        client.create_order("BTCUSDT", "BUY", "LIMIT", "0.01", str(20000 + i))
    reads = 5
    with Client(gateway.url, timeout=15) as public:
        for _ in range(reads):
            assert public.depth("BTCUSDT", 5)["bids"][0][0] == "20003.00"
    after = [scrape(url) for url in workers]
    engine_after = scrape(engine.url + "/metrics", token)

    # The kernel spreads connections over the workers: together they answered all four.
    assert sum(a.get(order, 0) - b.get(order, 0) for a, b in zip(after, before, strict=True)) == 4
    # Every public read is looked up in the worker's read cache: the first of a worker's is a
    # miss (the orders changed the book), later ones hits; together they count every read.
    lookups = {
        result: sum(
            a.get(f"tradehall_read_cache_lookups_total[('result', '{result}')]", 0)
            - b.get(f"tradehall_read_cache_lookups_total[('result', '{result}')]", 0)
            for a, b in zip(after, before, strict=True)
        )
        for result in ("hit", "miss")
    }
    assert lookups["miss"] >= 1 and lookups["hit"] + lookups["miss"] == reads, lookups
    for samples in after:
        assert "tradehall_nats_round_trip_seconds_count[]" in samples
        assert "tradehall_websocket_connections[]" in samples
    assert engine_after[placed] - engine_before.get(placed, 0) == 4
    assert engine_after["tradehall_forwarded_commands_total[]"] >= 4
    assert engine_after["tradehall_store_writable[]"] == 1
