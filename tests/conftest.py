"""Fixtures shared by every test package; the helpers behind them live in support.py."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from support import (
    ADMIN_TOKEN,
    BASE_URL,
    NATS_DOWN,
    PG_STATE,
    SERVE,
    SPLIT,
    Backend,
    Env,
    FakeClock,
    ServerProcess,
    SplitAdmin,
    make_exchange,
    postgres_unreachable,
    split_apps,
    start_server,
)
from tradehall.api.app import create_app
from tradehall.client import AdminClient


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test on the ``env`` fixture runs against one process and against the engine
    behind a gateway over NATS (in this process: two apps, one NATS), unless it is marked
    ``one_process`` (it looks inside the one process) or NATS is not reachable."""
    if "env" not in metafunc.fixturenames:
        return
    split = not metafunc.definition.get_closest_marker("one_process") and not NATS_DOWN
    metafunc.parametrize("env", [SERVE, SPLIT] if split else [SERVE], indirect=True)


@pytest.fixture
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    db_path = tmp_path / "tradehall.db"
    exchange = make_exchange(db_path)
    clock = FakeClock()
    if getattr(request, "param", SERVE) == SERVE:
        app = create_app(exchange, clock=clock, admin_token=ADMIN_TOKEN, run_scheduler=False)
        with TestClient(app) as http:
            yield Env(http, exchange, clock, AdminClient(BASE_URL, ADMIN_TOKEN, http=http), db_path)
    else:
        with split_apps(exchange, clock) as (engine_http, service, gateway, http):
            admin = SplitAdmin(
                BASE_URL, ADMIN_TOKEN, http=engine_http, gateway=gateway, engine=service
            )
            yield Env(http, exchange, clock, admin, db_path, gateway=gateway, engine=engine_http)
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a collection where two tests share an id: pytest-xdist keys tests by id and
    would run one of them and drop the rest without a word (pytest 9.2 builds an id from the
    function's name and its parametrization only; a plugin that names its items otherwise,
    as schemathesis' did for one test over many operations, gave all of them one id)."""
    shared = [nodeid for nodeid, count in Counter(i.nodeid for i in items).items() if count > 1]
    if shared:
        raise pytest.UsageError(
            f"{len(shared)} test ids are shared by several tests (one test function per"
            f" generated test, or a parametrization, gives each its own), e.g. {shared[0]}"
        )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if PG_STATE["skipped"]:
        terminalreporter.write_line(
            f"{PG_STATE['skipped']} PostgreSQL-backed tests skipped: {PG_STATE['reason']}"
        )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One chromium per test module, Debian's, driven by Playwright (never a downloaded
    browser): the browser tests' (tests/web)."""
    from playwright.sync_api import sync_playwright

    from tradehall.web.screenshots import launch_chromium

    with sync_playwright() as playwright:
        launched = launch_chromium(playwright)
        yield launched
        launched.close()
