"""The two processes of the scale-out topology (docs/deployment.md):

- ``run_engine``: the exchange (store, recovery, engine, group commit, scheduler) taking its
  commands from NATS; its only HTTP listener is the admin API, on loopback.
- ``run_gateway``: ``workers`` processes serving the REST API on one socket, forwarding to the
  engine.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from types import FrameType
from typing import Any

from starlette.types import ASGIApp

from tradehall import server
from tradehall.api.app import create_app
from tradehall.api.http import AppState
from tradehall.cluster import HISTORY_WAIT_S
from tradehall.cluster.engine_service import EngineService
from tradehall.cluster.gateway import Gateway
from tradehall.cluster.gateway_app import gateway_asgi
from tradehall.cluster.link import check_reachable, reachable
from tradehall.cluster.standby import StandbyStart, recent_commands
from tradehall.cluster.stream_relay import StreamRelay
from tradehall.config import Config, LimitSettings
from tradehall.datadir import DataDir
from tradehall.exchange import Exchange
from tradehall.store.journaled import JournaledStore
from tradehall.venue import venue_namespace

log = logging.getLogger("tradehall.gateway")


def run_engine(
    cfg: Config,
    datadir: DataDir,
    admin_host: str,
    admin_port: int,
    *,
    nats_url: str,
    subject: str,
    demo: bool,
    simulate: bool = False,
    announce: Callable[[str, dict[str, Any] | None], None],
    with_projector: bool = True,
    standby: StandbyStart | None = None,
) -> None:
    """With ``simulate`` the market simulation runs in the engine process (its participants
    trade through ``Exchange.apply``, as in ``serve``; ``tradehall sim`` drives it through the
    admin API)."""
    if standby is None:
        check_reachable(nats_url)
    else:  # a standby needs NATS only to lead: it leads only if NATS answers then
        standby.can_lead = lambda: reachable(nats_url)

    @contextlib.asynccontextmanager
    async def service(state: AppState) -> AsyncIterator[None]:
        assert state.hub is not None
        relay = StreamRelay(state.hub, subject)
        namespace = venue_namespace(cfg.limits, state.exchange.store)
        role = standby.role if standby is not None else None
        store = state.exchange.store
        recent = None
        if role is None and isinstance(store, JournaledStore):
            recent = recent_commands(store, store.head)  # a restart's resends: once, at most
        engine = EngineService(
            state, nats_url, subject, namespace=namespace, role=role, recent=recent
        )
        # The relay listens first: gateways restate their interest when the engine announces itself.
        async with relay.running(nats_url), engine.running():
            yield

    def make_app(exchange: Exchange, token: str, limits: LimitSettings) -> ASGIApp:
        return create_app(
            exchange,
            admin_token=token,
            client_api=False,
            companion=service,
            simulation=cfg.simulation,
            run_simulation=simulate,
            allowed_hosts=cfg.server.allowed_hosts,
        )

    server.run(
        cfg,
        datadir,
        admin_host,
        admin_port,
        demo=demo,
        announce=announce,
        rate_limits=False,  # clients' limits are the gateways' business
        make_app=make_app,
        with_projector=with_projector,
        history_wait_s=HISTORY_WAIT_S,
        standby=standby,
    )


def _serve_worker(sock: Any, make_gateway: Callable[[], Gateway], index: int = 0) -> bool:
    """Serve one worker; worker ``index`` (0, 1, ...) serves its metrics on the metrics port
    plus its index (each worker is a target of its own: docs/operations.md)."""
    gateway = make_gateway()
    if gateway.metrics_port is not None:
        gateway.metrics_port += index
    app = gateway_asgi(gateway)
    srv = server.GracefulServer(
        server.uvicorn_config(app), on_exit=server.drain_hook(app), drain_s=gateway.drain_s
    )
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, srv.handle_exit)
    srv.run(sockets=[sock])
    return srv.started


def run_gateway(
    host: str,
    port: int,
    *,
    workers: int,
    make_gateway: Callable[[], Gateway],
    announce: Callable[[str], None],
) -> None:
    """Serve until signalled. One worker runs in this process; more are forked children
    sharing the listening socket (the kernel spreads connections), restarted if one dies."""
    check_reachable(make_gateway().url)
    sock = server.listen(host, port)
    try:
        url = server.url_for(host, sock.getsockname()[1])
        if workers == 1:
            announce(url)
            if not _serve_worker(sock, make_gateway):
                raise server.StartError("the gateway did not start (see the log above)")
            return
        _supervise(sock, workers, make_gateway, lambda: announce(url))
    finally:
        sock.close()


def _die_with_parent() -> None:
    """A worker whose supervisor is killed (SIGKILL: no chance to stop its workers) is
    killed too, rather than serving on as an orphan (Linux's PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1
RESPAWN_PAUSE = 0.5
DID_NOT_START = 3
"""A worker's exit status when its server never started serving (NATS down, say)."""


def _supervise(
    sock: Any, workers: int, make_gateway: Callable[[], Gateway], announce: Callable[[], None]
) -> None:
    def spawn(index: int) -> int:
        pid = os.fork()
        if pid == 0:  # the worker
            _die_with_parent()
            code = DID_NOT_START
            try:
                code = 0 if _serve_worker(sock, make_gateway, index) else DID_NOT_START
            finally:
                os._exit(code)
        indexes[pid] = index
        return pid

    started = time.monotonic()
    indexes: dict[int, int] = {}
    """Each worker's index (its metrics port's offset), handed on to its replacement."""
    children = {spawn(index) for index in range(workers)}
    stopping = False
    failed = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    announce()
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        children.discard(pid)
        if stopping:
            continue
        did_not_start = os.WIFEXITED(status) and os.WEXITSTATUS(status) == DID_NOT_START
        if did_not_start and time.monotonic() - started < 5:  # NATS down...: give up
            failed = True
            stop(signal.SIGTERM, None)
            continue
        # A worker that served and then died (killed, crashed) is replaced, however early.
        log.warning("gateway worker %d ended (status %d); starting another", pid, status)
        time.sleep(RESPAWN_PAUSE)  # a worker failing at once must not fork in a tight loop
        children.add(spawn(indexes.pop(pid, 0)))
    if failed:
        raise server.StartError("a gateway worker did not start (see the log above)")
