"""Running the exchange as a server process: open the store, recover, listen, serve, and on
SIGTERM or SIGINT stop taking requests, commit what is in flight and exit cleanly."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Generator
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

import uvicorn
from starlette.types import ASGIApp

from tradehall import operations as ops
from tradehall.api.app import create_app
from tradehall.config import Config, LimitSettings
from tradehall.datadir import DataDir
from tradehall.exchange import Exchange
from tradehall.projector import Projector, ProjectorProcess, open_exchange
from tradehall.sim.faults import FaultInjector
from tradehall.store.base import StoreError, collector_paused
from tradehall.store.factory import open_store, store_identity
from tradehall.store.journaled import JournaledStore
from tradehall.stream.log_filters import quiet_invalid_utf8

if TYPE_CHECKING:
    from tradehall.cluster.standby import Role

log = logging.getLogger("tradehall.server")


class ListenError(Exception):
    pass


class StartError(Exception):
    """The app did not start (its lifespan's start-up failed; the log says why)."""


class Standby(Protocol):
    """How an HA engine comes to lead (``cluster.standby``)."""

    role: Role

    @property
    def stopping(self) -> Callable[[], bool]: ...

    def lead(self, cfg: Config, store: JournaledStore, datadir: DataDir) -> Exchange: ...


AppFactory = Callable[[Exchange, str, LimitSettings], ASGIApp]
"""(exchange, admin token, rate limits) -> the app a server process serves."""


class GracefulServer(uvicorn.Server):
    """uvicorn re-raises a captured SIGTERM after its shutdown, which would kill the process
    before our own cleanup (final commit, server.json) ran; here a signal only asks for a
    graceful stop and the process then exits normally. ``on_started`` runs once the app's
    startup is done (the engine process's NATS subscriptions exist), before requests are
    served."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_started: Callable[[], None] | None = None,
        on_exit: Callable[[], None] | None = None,
        drain_s: float = 0,
    ):
        super().__init__(config)
        self.on_started = on_started
        self.on_exit = on_exit
        """Called when a signal asks the server to stop (``/readyz`` then says draining)."""
        self.drain_s = drain_s
        """After the first signal, serve on this long (``/readyz`` answering 503) before
        stopping: the time a load balancer's probe needs to see the node leave."""
        self._draining: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.on_exit is not None:
            self.on_exit()
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if self.should_exit or self._draining is not None:
            log.info("%s received again: stopping at once", name)
        elif self.drain_s > 0:
            log.info(
                "%s received: draining for %gs (/readyz answers 503), then stopping",
                name,
                self.drain_s,
            )
            self._draining = threading.Timer(self.drain_s, super().handle_exit, (sig, frame))
            self._draining.daemon = True
            self._draining.start()
            return
        else:
            log.info("%s received: stopping (requests in flight are answered)", name)
        super().handle_exit(sig, frame)  # a second signal stops at once

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.on_started is not None and not self.should_exit:
            self.on_started()
        if not self.should_exit:
            for server in self.servers:
                for listening in server.sockets:
                    host, port = listening.getsockname()[:2]
                    shown = f"[{host}]" if ":" in host else host
                    log.info("listening on http://%s:%d (pid %d)", shown, port, os.getpid())

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        log.info("stopped taking requests; every answer is sent")

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def drain_hook(app: ASGIApp) -> Callable[[], None]:
    """What marks ``app``'s front as draining (through the wrappers around it: the fault
    injector), for ``GracefulServer.on_exit``."""

    def drain() -> None:
        inner: Any = app
        while inner is not None:
            state = getattr(getattr(inner, "state", None), "tradehall", None)
            if state is not None:
                state.draining = True
                return
            inner = getattr(inner, "app", None)

    return drain


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    return sock


def url_for(host: str, port: int) -> str:
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


WS_MAX_MESSAGE = 1 << 20
"""The largest WebSocket message uvicorn reads (the largest max_message_bytes allowed)."""


def uvicorn_config(app: ASGIApp) -> uvicorn.Config:
    """How tradehall runs on uvicorn. ``proxy_headers=False``: uvicorn would otherwise take
    the client's address from ``X-Forwarded-For`` whenever the connection comes from
    127.0.0.1, and any local client (or a proxy passing the header through) could then pass
    a key's IP allow-list and the per-IP rate limits with an address of its choosing."""
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        log_level="warning",
        # uvicorn's records go to the root logger, in the format ``tradehall.logs`` set up.
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=10,
        proxy_headers=False,
        # A WebSocket message larger than this closes the connection (1009) before it is
        # buffered whole; smaller ones over [websocket] max_message_bytes get an error frame.
        ws_max_size=WS_MAX_MESSAGE,
        # websockets' sans-I/O protocol: the cheapest per frame of uvicorn's three (measured
        # in docs/websocket.md), and the one whose socket the streams write to directly
        # (tradehall.stream.direct). No permessage-deflate: every server frame is gzip JSON
        # already, and deflating it again per client (browsers always offer the extension)
        # cost 70 % more per frame.
        ws="websockets-sansio",
        ws_per_message_deflate=False,
    )
    quiet_invalid_utf8()  # after uvicorn.Config, which configures its loggers
    return config


def recover_for_serving(exchange: Exchange) -> None:
    """``exchange.recover()``, then everything it built (books, balances, users...), which
    lives as long as the server, moved out of the garbage collector's sight (``gc.freeze``)
    before the collector runs again: no collection ever traverses it, neither the one that
    would otherwise follow recovery at once (every object recovery built is young) nor the
    full ones later on."""
    with collector_paused():
        exchange.recover()
        gc.freeze()


def app_with_faults(
    exchange: Exchange, token: str, limits: LimitSettings, simulate: bool, admin_remote: bool
) -> ASGIApp:
    """The API, with the simulation settings, wrapped in the fault injector when the
    configuration enables one (docs/simulation.md)."""
    settings = exchange.config.simulation
    app = create_app(
        exchange,
        admin_token=token,
        limits=limits,
        simulation=settings,
        run_simulation=simulate,
        max_clock_ahead_ms=exchange.config.server.max_clock_ahead_ms,
        admin_remote=admin_remote,
        allowed_hosts=exchange.config.server.allowed_hosts,
    )
    if not settings.faults.enabled:
        return app
    injector = FaultInjector(app, settings.faults)
    app.state.tradehall.faults = injector
    return injector


def run(
    cfg: Config,
    datadir: DataDir,
    host: str,
    port: int,
    *,
    demo: bool,
    announce: Callable[[str, dict[str, Any] | None], None],
    rate_limits: bool = True,
    simulate: bool = False,
    make_app: AppFactory | None = None,
    with_projector: bool = True,
    history_wait_s: float | None = None,
    standby: Standby | None = None,
) -> None:
    """Serve until signalled; with ``simulate`` the market simulation starts with the server
    (``tradehall sim start`` can start it later otherwise). The caller holds the data
    folder's lock (the store: SQLite in the folder, or PostgreSQL, whose advisory lock the
    store takes). ``history_wait_s``: how long a history read waits for the projector
    (default: the store's ``WAIT_S``). ``standby``: an HA engine, which follows the journal
    as a standby until it leads (``cluster.standby``), instead of recovering at once."""
    store = open_store(cfg.server.database, datadir.path, synchronous=cfg.server.sqlite_synchronous)
    if history_wait_s is not None:
        store.wait_s = history_wait_s
    projector: ProjectorProcess | None = None
    try:
        debug = os.environ.get("TRADEHALL_CHECK_INVARIANTS", "") not in ("", "0")
        with collector_paused():
            if standby is not None:
                exchange = standby.lead(cfg, store, datadir)
            else:
                exchange = open_exchange(
                    cfg, store, datadir.secret_box(), inline=False, check_invariants=debug
                )
            gc.freeze()  # see recover_for_serving
        exchange.commit_now()  # secrets found in clear (older stores) are sealed at once
        if with_projector:
            projector = ProjectorProcess(cfg, str(datadir.path))
            projector.start()
            store.projector = projector
        demo_info = None
        if demo:
            demo_info = ops.ensure_demo(exchange, time.time_ns() // 1_000_000, index=not simulate)
            exchange.commit_now()
        if projector is not None and standby is None:
            tables_catch_up(store)
        token = datadir.admin_token()
        limits = dataclasses.replace(cfg.limits, enabled=cfg.limits.enabled and rate_limits)
        sock = listen(host, port)
        try:
            app = (
                make_app(exchange, token, limits)
                if make_app is not None
                else app_with_faults(exchange, token, limits, simulate, cfg.server.admin_remote)
            )
            bound_port = sock.getsockname()[1]

            def started() -> None:
                datadir.write_server(host, bound_port, store_identity(cfg.server.database))
                announce(url_for(host, bound_port), demo_info)

            server = GracefulServer(
                uvicorn_config(app),
                on_started=started,
                on_exit=drain_hook(app),
                drain_s=cfg.server.drain_s,
            )
            if standby is not None:
                standby.role.stop_server = lambda: setattr(server, "should_exit", True)
            # A signal from now on means a graceful stop.
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, server.handle_exit)
            if standby is not None and standby.stopping():
                server.should_exit = True  # signalled while it took over: stop at once
            server.run(sockets=[sock])
            if not server.started:
                raise StartError("the server did not start (see the log above)")
        finally:
            datadir.clear_server()
            sock.close()
    finally:
        if projector is not None:
            projector.stop()
            if standby is None or standby.role.stepped_down is None:
                finish_projection(store, cfg, datadir)  # else the new leader's projector does
        store.close()


CATCH_UP_LIMIT_S = 60.0


def tables_catch_up(store: JournaledStore, limit_s: float = CATCH_UP_LIMIT_S) -> None:
    """After a crash the journal holds records the tables do not (the engine replayed them
    into memory): the projector child, just started, projects them before the server
    answers, so that the first history reads do not find it still starting (they would wait
    ``wait_s`` and be told to retry). A clean stop leaves nothing to wait for
    (``finish_projection``); past ``limit_s`` the server starts anyway (reads then wait or
    are told to retry, as under load). Not for a standby taking over, whose clients are
    waiting for it to lead."""
    projected, head = store.projected_seen(), store.head
    if projected >= head:
        return
    log.info(
        "the tables stand at journal record %d of %d: the projector catches them up before"
        " the server answers",
        projected,
        head,
    )
    try:
        store.caught_up(head, wait_s=limit_s)
    except StoreError as exc:
        log.warning("the tables have not caught up (%s): serving anyway", exc)


def finish_projection(store: JournaledStore, cfg: Config, datadir: DataDir) -> None:
    """After the projector child stopped: the tables caught up here if it left them behind
    (it could not finish in time, or could not run), so that a stopped server's tables hold
    every acknowledged write (backups, offline tools). Nothing is lost if this fails: the
    next start replays the journal."""
    try:
        if store.projected() >= store.head:
            return
        log.warning(
            "the tables stand at journal record %d of %d: catching up before stopping",
            store.projected(),
            store.head,
        )
        Projector(cfg, store.projections, store.journal, datadir.secret_box()).catch_up()
    except Exception:
        log.exception("catching the tables up failed (the next start replays the journal)")
