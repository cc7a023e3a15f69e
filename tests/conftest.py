"""Fixtures shared by every test package; the helpers behind them live in support.py."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from support import (
    ADMIN_TOKEN,
    BASE_URL,
    PG_STATE,
    Backend,
    Env,
    FakeClock,
    ServerProcess,
    make_exchange,
    postgres_unreachable,
    start_server,
)
from tradehall.api.app import create_app
from tradehall.client import AdminClient


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    db_path = tmp_path / "tradehall.db"
    exchange = make_exchange(db_path)
    clock = FakeClock()
    app = create_app(exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False)
    with TestClient(app) as http:
        yield Env(http, exchange, clock, AdminClient(BASE_URL, ADMIN_TOKEN, http=http), db_path)
    exchange.store.close()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Any]:
    """Start servers on demand; every one still running at the end is stopped."""
    started: list[ServerProcess] = []

    def start(
        data_dir: Path | None = None, *extra: str, rate_limits: bool = False
    ) -> ServerProcess:
        server = start_server(data_dir or tmp_path / "data", *extra, rate_limits=rate_limits)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop(signal.SIGKILL)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Run the test on each store backend (see support.Backend); PostgreSQL skips, with one
    summary line saying why, when no server is reachable."""
    if request.param == "postgresql":
        reason = postgres_unreachable()
        if reason is not None:
            PG_STATE["skipped"] += 1
            pytest.skip(reason)
    chosen = Backend(request.param)
    try:
        yield chosen
    finally:
        chosen.drop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if PG_STATE["skipped"]:
        terminalreporter.write_line(
            f"{PG_STATE['skipped']} PostgreSQL-backed tests skipped: {PG_STATE['reason']}"
        )
