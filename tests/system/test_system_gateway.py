"""The same client-visible behaviour from both topologies: `tradehall serve` (one process)
and `tradehall engine` behind `tradehall gateway` (over NATS); then the split topology's
failure behaviour, with real processes: the engine killed and restarted, a gateway killed,
a key revoked, a command sent twice."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import nats.errors
import pytest
from nats.aio.client import Client as Nats

import tradehall
from cli_support import tradehall_inline
from support import (
    NATS_URL,
    ServerProcess,
    nats_unreachable,
    start_engine,
    start_gateway,
    start_server,
    tradehall_command,
)
from tradehall.client import AdminClient, ApiError, Client
from tradehall.client.signing import request_path_for_signing, sign, signature_payload
from tradehall.cluster.link import connect
from tradehall.cluster.protocol import (
    Answered,
    Command,
    Commands,
    Forwarded,
    decode_answers,
    encode,
    wire_params,
)
from tradehall.datadir import DataDir

SYMBOL = "BTCUSDT"
CONTRACT = "E-BTC-USDT"


@dataclass
class Topology:
    url: str
    demo: dict[str, Any]
    admin: AdminClient
    processes: list[ServerProcess]

    def client(self, url: str | None = None) -> Client:
        return Client(url or self.url, self.demo["apiKey"], self.demo["secret"], timeout=15.0)


def admin_of(engine: ServerProcess) -> AdminClient:
    token = DataDir(engine.data_dir).read_token()
    assert token is not None
    return AdminClient(engine.url, token)


def split(
    data_dir: Path,
    subject: str,
    gateways: int = 1,
    workers: int = 1,
    gateway_args: tuple[str, ...] = (),
) -> Topology:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    engine = start_engine(data_dir, subject, "--demo")
    processes = [engine]
    try:
        for _ in range(gateways):
            processes.append(start_gateway(subject, *gateway_args, workers=workers))
    except Exception:
        for process in processes:
            process.stop(signal.SIGKILL)
        raise
    assert engine.demo is not None
    return Topology(processes[1].url, engine.demo, admin_of(engine), processes)


@pytest.fixture
def stopped() -> Iterator[list[ServerProcess]]:
    """Processes to stop when the test ends (however it ends)."""
    processes: list[ServerProcess] = []
    yield processes
    for process in processes:
        process.stop(signal.SIGKILL)


@pytest.fixture(params=["serve", "engine+gateway"])
def topology(
    request: pytest.FixtureRequest, tmp_path: Path, stopped: list[ServerProcess]
) -> Topology:
    if request.param == "serve":
        server = start_server(tmp_path / "data", "--demo", "--no-sim")
        stopped.append(server)
        assert server.demo is not None
        return Topology(server.url, server.demo, admin_of(server), [server])
    found = split(tmp_path / "data", f"test-{uuid.uuid4().hex}")
    stopped.extend(found.processes)
    return found


def test_the_same_answers_from_both_topologies(topology: Topology) -> None:
    client = topology.client()
    assert client.ping() == {}
    placed = client.create_order(SYMBOL, "BUY", "LIMIT", "0.5", "20000", client_order_id="a-1")
    assert placed["status"] == "NEW" and placed["clientOrderId"] == "a-1"
    order_id = placed["orderId"]
    found = client.get_order(SYMBOL, order_id)
    assert found["status"] == "NEW" and found["origQty"] == "0.500000"
    assert client.depth(SYMBOL)["bids"] == [["20000.00", "0.500000"]]
    usdt = next(b for b in client.account()["balances"] if b["asset"] == "USDT")
    assert usdt["locked"] == "10000.00000000"
    assert [o["orderId"] for o in client.open_orders(SYMBOL)] == [order_id]
    assert client.cancel_order(SYMBOL, order_id)["status"] == "CANCELED"
    assert client.get_order(SYMBOL, client_order_id="a-1")["status"] == "CANCELED"
    assert client.depth(SYMBOL)["bids"] == []

    # A trade with a second user (keys and funds through the admin API), in the public reads.
    buyer, _ = trader(topology, {"USDT": "10000"})
    client.create_order(SYMBOL, "SELL", "LIMIT", "0.25", "21000")
    bought = buyer.create_order(SYMBOL, "BUY", "MARKET", "5250")
    assert bought["status"] == "FILLED"
    assert client.trades(SYMBOL)["list"][0]["price"] == "21000.00"
    assert client.ticker(SYMBOL)["last"] == "21000.00"

    # Futures: an order resting on the book and in the account's view.
    futures = client.futures_create_order(CONTRACT, "BUY", "LIMIT", "OPEN", 2, "20000")
    f_order = client.futures_get_order(CONTRACT, futures["orderId"])
    assert f_order["status"] == "NEW" and f_order["side"] == "BUY"
    assert client.futures_depth(CONTRACT)["bids"][0][0] == "20000.0"
    assert client.futures_account()["account"]

    # The family's v2 addresses reach the same handlers.
    v2 = Client(topology.url, topology.demo["apiKey"], topology.demo["secret"], spot_version="v2")
    assert v2.get_order(SYMBOL, order_id)["status"] == "CANCELED"

    # Refusals: the gateway's (signature) and the engine's (state) alike.
    with pytest.raises(ApiError) as bad_signature:
        Client(topology.url, topology.demo["apiKey"], "0" * 32).account()
    assert (bad_signature.value.status, bad_signature.value.code) == (401, -1022)
    with pytest.raises(ApiError) as too_big:
        client.create_order(SYMBOL, "BUY", "LIMIT", "1000000", "20000")
    assert too_big.value.code == -2017
    with pytest.raises(ApiError) as unknown:
        client.create_order("NOPEUSDT", "BUY", "LIMIT", "1", "1")
    assert unknown.value.code == -1121
    with pytest.raises(ApiError) as malformed:
        client.create_order(SYMBOL, "BUY", "LIMIT", "0.1", "1.2.3")
    assert malformed.value.code == -1102

    # The API's description, served by whichever process answers (a gateway itself).
    with urllib.request.urlopen(topology.url + "/openapi.json", timeout=10) as answer:
        document = json.loads(answer.read())
    assert "/spot/open/sapi/v1/order" in document["paths"]
    assert "/futures/open/fapi/v1/order" in document["paths"]


def trader(topology: Topology, funds: dict[str, str]) -> tuple[Client, str]:
    """A new user's client and API key, with ``funds``, once its key works through
    ``topology.url``."""
    user = topology.admin.create_user()
    key = topology.admin.create_key(user["id"])
    for asset, amount in funds.items():
        topology.admin.deposit(user["id"], asset, amount)
    client = Client(topology.url, key["apiKey"], key["secret"])
    deadline = time.monotonic() + 10
    while True:  # a gateway hears of a new key just after its commit
        try:
            client.account()
            return client, key["apiKey"]
        except ApiError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_a_revoked_key_stops_working_at_once(topology: Topology) -> None:
    client, api_key = trader(topology, {})
    topology.admin.revoke_key(api_key)
    with pytest.raises(ApiError) as refused:
        client.account()
    assert refused.value.code == -2015


def test_engine_killed_gateways_answer_503_then_serve_again(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    subject = f"test-{uuid.uuid4().hex}"
    found = split(tmp_path / "data", subject)
    stopped.extend(found.processes)
    engine = found.processes[0]
    client = found.client()
    acknowledged = [
        client.create_order(SYMBOL, "BUY", "LIMIT", "0.01", str(20000 + i))["orderId"]
        for i in range(5)
    ]
    engine.stop(signal.SIGKILL)
    with pytest.raises(ApiError) as down:
        client.create_order(SYMBOL, "BUY", "LIMIT", "0.01", "20000")
    assert (down.value.status, down.value.code) == (503, -1001)
    with pytest.raises(ApiError) as down_read:
        client.depth(SYMBOL)
    assert (down_read.value.status, down_read.value.code) == (503, -1001)

    restarted = start_engine(engine.data_dir, subject)
    stopped.append(restarted)
    deadline = time.monotonic() + 20
    while True:
        try:
            orders = [client.get_order(SYMBOL, order_id) for order_id in acknowledged]
            break
        except ApiError as exc:
            if exc.code != -1001 or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    assert [o["status"] for o in orders] == ["NEW"] * 5
    assert client.create_order(SYMBOL, "BUY", "LIMIT", "0.01", "19000")["status"] == "NEW"


def test_a_gateway_killed_leaves_the_others_clients_alone(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    found = split(tmp_path / "data", f"test-{uuid.uuid4().hex}", gateways=2, workers=2)
    stopped.extend(found.processes)
    first, second = found.processes[1], found.processes[2]
    survivor = found.client(second.url)
    placed = survivor.create_order(SYMBOL, "BUY", "LIMIT", "0.01", "20000")
    first.stop(signal.SIGKILL)  # its supervisor: its workers die with it
    deadline = time.monotonic() + 10
    while True:  # until the killed gateway's clients get no answer
        try:
            Client(first.url, timeout=1.0).ping()
        except Exception:
            break
        assert time.monotonic() < deadline, "the killed gateway's workers still answer"
        time.sleep(0.05)
    for i in range(10):
        survivor.create_order(SYMBOL, "BUY", "LIMIT", "0.01", str(19000 + i))
    assert survivor.get_order(SYMBOL, placed["orderId"])["status"] == "NEW"
    assert len(survivor.open_orders(SYMBOL)) == 11


def worker_pids(supervisor: int) -> set[int]:
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    return {int(pid) for pid in children}


def test_a_worker_killed_just_after_the_start_is_replaced(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    """Not taken for a start failure (which stops the gateway: NATS down...): it had
    started. The supervisor replaces it, however early, and the port keeps serving."""
    found = split(tmp_path / "data", f"test-{uuid.uuid4().hex}", gateways=1, workers=2)
    stopped.extend(found.processes)
    gateway = found.processes[1]
    first = worker_pids(gateway.proc.pid)
    assert len(first) == 2
    victim = min(first)
    os.kill(victim, signal.SIGKILL)  # well within the gateway's first 5 seconds
    deadline = time.monotonic() + 15
    while len((now := worker_pids(gateway.proc.pid)) - {victim}) < 2:
        assert gateway.proc.poll() is None, "the supervisor gave up"
        assert time.monotonic() < deadline, now
        time.sleep(0.1)
    assert gateway.proc.poll() is None
    client = found.client()
    for _ in range(10):  # both workers answer (the kernel spreads the connections)
        assert client.ping() == {}


def order_command(api_key: str, volume: str = "0.01", symbol: str = SYMBOL) -> Forwarded:
    params = {"symbol": symbol, "side": "BUY", "type": "LIMIT", "volume": volume, "price": "20000"}
    return Forwarded(
        uuid.uuid4().hex, "POST", "/spot/open/sapi/v1/order", wire_params(params), api_key,
        "127.0.0.1",
    )  # fmt: skip


def send_batches(subject: str, *batches: Commands, together: bool = False) -> list[list[Answered]]:
    """The engine's answers to each message (sent at once when ``together``, else in turn)."""

    async def send() -> list[list[Answered]]:
        nc = await connect(NATS_URL, "test")
        try:
            requests = [nc.request(f"{subject}.cmd", encode(b), timeout=10) for b in batches]
            if together:
                replies = await asyncio.gather(*requests)
            else:
                replies = [await request for request in requests]
            return [decode_answers(reply.data) for reply in replies]
        finally:
            await nc.close()

    return asyncio.run(send())


def test_a_command_sent_twice_is_applied_once(tmp_path: Path, stopped: list[ServerProcess]) -> None:
    subject = f"test-{uuid.uuid4().hex}"
    found = split(tmp_path / "data", subject)
    stopped.extend(found.processes)
    client = found.client()
    now = int(time.time() * 1000)
    command = order_command(found.demo["apiKey"])
    batch = Commands([command], now)
    # Twice at once (the second while the first waits for its commit), then again.
    together = send_batches(subject, batch, batch, together=True)
    (later,) = send_batches(subject, msgspec.structs.replace(batch, attempt=2))
    answers = [answer for answers in (*together, later) for answer in answers]
    assert {a.status for a in answers} == {200}
    assert answers[0].body == answers[1].body == answers[2].body
    assert len(client.open_orders(SYMBOL)) == 1

    # A resend of an id this engine never saw, first sent before it started: the engine
    # before it may have applied it, so it is refused rather than applied (maybe) twice.
    orphan = Commands([order_command(found.demo["apiKey"])], 0, attempt=2)
    ((refused,),) = send_batches(subject, orphan)
    assert refused.status == 503 and msgspec.json.decode(refused.body)["code"] == -1001
    assert len(client.open_orders(SYMBOL)) == 1


def test_a_resend_after_an_engine_restart_is_applied_once(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    """The journal records the ids of the commands it holds: a resend that reaches a
    restarted engine (or a new leader) is applied only if it was never committed; one that
    was committed gets 503 / -1001 "applied ... its answer is lost", never a second order."""
    subject = f"test-{uuid.uuid4().hex}"
    found = split(tmp_path / "data", subject)
    stopped.extend(found.processes)
    engine = found.processes[0]
    client = found.client()
    key = found.demo["apiKey"]
    committed = order_command(key, "0.01")
    sent_at = int(time.time() * 1000)
    ((first,),) = send_batches(subject, Commands([committed], sent_at))
    assert first.status == 200
    engine.stop(signal.SIGKILL)  # as if its answer had been lost with it
    restarted = start_engine(engine.data_dir, subject)
    stopped.append(restarted)
    never_sent = order_command(key, "0.02")  # lost on its way to the dead engine
    resend = Commands([committed, never_sent], sent_at, attempt=2)
    (answers,) = send_batches(subject, resend)
    assert answers[0].status == 503, answers[0]
    refused = msgspec.json.decode(answers[0].body)
    assert refused["code"] == -1001 and "applied" in refused["msg"], refused
    assert answers[1].status == 200, answers[1]
    (again,) = send_batches(subject, resend)  # the same resend once more: nothing new
    assert again[0].status == 503 and again[1].body == answers[1].body
    resting = client.open_orders(SYMBOL)
    assert sorted(o["origQty"] for o in resting) == ["0.010000", "0.020000"]


def test_a_batch_is_applied_in_order_each_command_once(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    """One message of several commands: applied in order, each answered in its place; one
    refused leaves the others alone; an id twice in it, or in a resend of the whole message
    after a lost answer, is applied once."""
    subject = f"test-{uuid.uuid4().hex}"
    found = split(tmp_path / "data", subject)
    stopped.extend(found.processes)
    client = found.client()
    key = found.demo["apiKey"]
    first, bad, second = (
        order_command(key, "0.01"),
        order_command(key, "1.2.3"),
        order_command(key, "0.02"),
    )
    place_only = order_command(key, "0.03")
    unknown_pair = order_command(key, "0.01", symbol="NOPEUSDT")
    batch = Commands([first, bad, second, first, unknown_pair, place_only], int(time.time() * 1000))
    (answers,) = send_batches(subject, batch)
    assert [a.status for a in answers] == [200, 400, 200, 200, 400, 200]
    bodies = [msgspec.json.decode(a.body) for a in answers]
    assert bodies[1]["code"] == -1102 and bodies[4]["code"] == -1121
    assert answers[3].body == answers[0].body  # the same id twice: one order, one answer
    ids = [bodies[i]["orderId"] for i in (0, 2, 5)]
    assert ids == sorted(ids) and len(set(ids)) == 3  # applied in the message's order
    # The answer lost: the gateway resends the message; nothing is applied again.
    (again,) = send_batches(subject, msgspec.structs.replace(batch, attempt=2))
    assert [a.body for a in again] == [a.body for a in answers]
    resting = client.open_orders(SYMBOL)
    assert sorted(o["orderId"] for o in resting) == sorted(ids)
    assert sorted(o["origQty"] for o in resting) == ["0.010000", "0.020000", "0.030000"]
    # A later message that repeats one of them among new ones: only the new one is applied.
    fresh = order_command(key, "0.04")
    (mixed,) = send_batches(subject, Commands([second, fresh], int(time.time() * 1000)))
    assert mixed[0].body == answers[2].body and mixed[1].status == 200
    assert len(client.open_orders(SYMBOL)) == 4


def test_gateway_start_without_nats_is_a_clear_error() -> None:
    done = subprocess.run(
        tradehall_command("gateway", "--port", "0", "--json", "--nats", "nats://127.0.0.1:1"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert "cannot connect to NATS at nats://127.0.0.1:1" in done.stdout


NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


def own_nats(port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """A NATS server of this test's own (the machine's shared one is not restarted)."""
    proc = subprocess.Popen(
        [NATS_SERVER, "-a", "127.0.0.1", "-p", str(port), "-l", str(log), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return proc
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.05)


def until_reachable(read: Callable[[], Any], timeout: float = 15.0) -> Any:
    """``read()``, again while it answers 503 -1001 "try again" (the engine's link to a
    restarted NATS may still be settling on a loaded machine): the lookups check what was
    kept, not how soon the link is back."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return read()
        except ApiError as exc:
            if exc.code != -1001 or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_nats_restarted_under_load_nothing_lost_nothing_twice(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    if not Path(NATS_SERVER).exists():
        pytest.skip("no nats-server binary to run a NATS of the test's own")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"nats://127.0.0.1:{port}"
    nats = own_nats(port, tmp_path / "nats.log")
    try:
        subject = "restart"
        engine = start_engine(tmp_path / "data", subject, "--demo", nats=url)
        stopped.append(engine)
        gateway = start_gateway(subject, nats=url)
        stopped.append(gateway)
        assert engine.demo is not None
        client = Client(gateway.url, engine.demo["apiKey"], engine.demo["secret"], timeout=15)
        sent: dict[str, str] = {}  # client order id -> "ok" or the refusal's code
        stop = threading.Event()

        def trade() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                cid = f"r-{n}"
                try:
                    client.create_order(
                        SYMBOL, "BUY", "LIMIT", "0.001", "20000", client_order_id=cid
                    )
                    sent[cid] = "ok"
                except ApiError as exc:
                    sent[cid] = str(exc.code)

        trader = threading.Thread(target=trade)
        trader.start()
        try:
            time.sleep(0.5)
            nats.kill()
            nats.wait(10)
            time.sleep(0.3)
            nats = own_nats(port, tmp_path / "nats.log")
            deadline = time.monotonic() + 20
            while "ok" not in list(sent.values())[-3:]:  # trading again through the new NATS
                assert time.monotonic() < deadline, f"no order went through since: {sent}"
                time.sleep(0.1)
        finally:
            stop.set()
            trader.join(30)
        refused = {code for code in sent.values() if code != "ok"}
        assert refused <= {"-1001"}, sent  # only "the engine is not reachable"
        found = {}
        for cid, outcome in sent.items():
            try:
                found[cid] = until_reachable(
                    functools.partial(client.get_order, SYMBOL, client_order_id=cid)
                )["status"]
            except ApiError as exc:
                assert exc.code == -2013 and outcome != "ok", (cid, outcome)
        assert all(found.get(cid) == "NEW" for cid, o in sent.items() if o == "ok")
        # Each order once: as many resting orders as client ids found.
        assert len(until_reachable(lambda: client.open_orders(SYMBOL, 1000))) == len(found)
    finally:
        nats.kill()
        nats.wait(10)


def test_gateways_share_replay_protection_through_redis(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    try:
        socket.create_connection(("127.0.0.1", 6379), 1).close()
    except OSError:
        pytest.skip("no Redis on 127.0.0.1:6379: shared replay protection untested")
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    config = tmp_path / "config.toml"
    default = (Path(tradehall.__file__).parent / "default_config.toml").read_text()
    config.write_text(default + '\n[limits]\nstorage = "redis://127.0.0.1:6379"\n')
    subject = f"test-{uuid.uuid4().hex}"
    engine = start_engine(tmp_path / "data", subject, "--demo", "--config", str(config))
    stopped.append(engine)
    first = start_gateway(subject, "--config", str(config))
    stopped.append(first)
    second = start_gateway(subject, "--config", str(config))
    stopped.append(second)
    assert engine.demo is not None
    path = "/spot/open/sapi/v1/account"
    ts = str(int(time.time() * 1000))
    signed_path = request_path_for_signing(path, "")
    signature = sign(engine.demo["secret"], signature_payload(ts, "GET", signed_path, b""))
    headers = {"X-CH-APIKEY": engine.demo["apiKey"], "X-CH-TS": ts, "X-CH-SIGN": signature}
    accepted = get(first.url + path, headers)
    replayed = get(second.url + path, headers)
    assert accepted[0] == 200 and "balances" in accepted[1], accepted
    assert replayed[0] == 401 and replayed[1]["code"] == -1022
    assert "replayed" in replayed[1]["msg"]


def get(url: str, headers: dict[str, str]) -> tuple[int, Any]:
    """(status, JSON body) of one plain GET."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def until_listening(nc: Nats, subject: str) -> None:
    """Once the engine answers on ``subject`` (it announces itself a moment before its NATS
    subscriptions are made)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            assert decode_answers((await nc.request(subject, encode(Commands([], 0)))).data) == []
            return
        except nats.errors.NoRespondersError:
            assert time.monotonic() < deadline, "the engine never listened"
            await asyncio.sleep(0.05)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_answers_too_large_for_one_reply_are_asked_for_again(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    """NATS refuses messages over its maximum size: a reply whose answers would not fit
    carries those that do, and an "ask again" marker for the others, which a resend of each
    id alone then gets (from the window: nothing is applied twice)."""
    if not Path(NATS_SERVER).exists():
        pytest.skip("no nats-server binary to run a NATS of the test's own")
    port = free_port()
    config = tmp_path / "nats.conf"
    config.write_text("max_payload: 16384\n")
    nats = own_nats(port, tmp_path / "nats.log", "-c", str(config))
    try:
        url = f"nats://127.0.0.1:{port}"
        engine = start_engine(tmp_path / "data", "small", "--demo", nats=url)
        stopped.append(engine)
        assert engine.demo is not None
        key = engine.demo["apiKey"]
        now = int(time.time() * 1000)
        orders: list[Command] = [order_command(key, f"0.{n + 1:03d}") for n in range(45)]
        listing: list[Command] = [
            Forwarded(uuid.uuid4().hex, "GET", "/spot/open/sapi/v1/openOrders",
                      wire_params({"symbol": SYMBOL, "limit": "100"}), key, "127.0.0.1")
            for _ in range(3)
        ]  # fmt: skip

        async def send(*batches: Commands) -> list[list[Answered]]:
            nc = await connect(url, "test")
            try:
                await until_listening(nc, "small.cmd")
                replies = [await nc.request("small.cmd", encode(b), timeout=10) for b in batches]
                return [decode_answers(reply.data) for reply in replies]
            finally:
                await nc.close()

        placed, first = asyncio.run(send(Commands(orders, now), Commands(listing, now)))
        assert {a.status for a in placed} == {200}
        assert [a.status for a in first] == [200, 0, 0]  # the last two did not fit
        assert 6200 < len(first[0].body) < 12000
        alone = asyncio.run(send(*(Commands([c], now, attempt=2) for c in listing[1:])))
        assert [a.status for (a,) in alone] == [200, 200]
        assert all(a.body == first[0].body for (a,) in alone)  # no order placed meanwhile
    finally:
        nats.kill()
        nats.wait(10)


def test_public_reads_from_gateway_caches_follow_the_book(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    """Each gateway keeps public answers (docs/deployment.md, "Public reads on gateways"),
    here for up to a minute: an order shows at once in the depth read through the gateway
    that placed it, and through another gateway as soon as the engine's market note reaches
    it, not when its kept answer grows old."""
    found = split(
        tmp_path / "data",
        f"test-{uuid.uuid4().hex}",
        gateways=2,
        gateway_args=("--read-cache-ms", "60000"),
    )
    stopped.extend(found.processes)
    here, there = found.client(found.processes[1].url), found.client(found.processes[2].url)
    for reader in (here, there):
        assert reader.depth(SYMBOL)["bids"] == reader.depth(SYMBOL)["bids"] == []
    placed = here.create_order(SYMBOL, "BUY", "LIMIT", "0.01", "20000")
    assert [level[0] for level in here.depth(SYMBOL)["bids"]] == ["20000.00"]
    deadline = time.monotonic() + 1
    while not there.depth(SYMBOL)["bids"]:
        assert time.monotonic() < deadline, "the other gateway kept the old depth"
        time.sleep(0.01)
    here.cancel_order(SYMBOL, placed["orderId"])
    assert here.depth(SYMBOL)["bids"] == []
    deadline = time.monotonic() + 10
    while len(reports := found.admin.gateways()["gateways"]) < 2 or not all(
        g["readCache"]["hits"] > 0 for g in reports
    ):  # each kept the first depth and answered the second itself
        assert time.monotonic() < deadline, reports
        time.sleep(0.2)


def test_the_engine_lists_its_gateways_for_the_operator(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    """`tradehall gateways --json` on the engine's data folder: each worker with its process
    and its requests, until it stops (it says so as it goes)."""
    found = split(tmp_path / "data", f"test-{uuid.uuid4().hex}", gateways=1, workers=2)
    stopped.extend(found.processes)
    engine, gateway = found.processes

    def listed() -> list[dict[str, Any]]:
        done = tradehall_inline("gateways", "--data-dir", str(engine.data_dir), "--json")
        assert done.returncode == 0, done.stderr
        gateways: list[dict[str, Any]] = json.loads(done.stdout)["gateways"]
        return gateways

    deadline = time.monotonic() + 20
    while len(workers := listed()) < 2:
        assert time.monotonic() < deadline, workers
        time.sleep(0.2)
    assert all(w["pid"] != gateway.proc.pid for w in workers)  # the workers, not the supervisor
    assert {w["host"] for w in workers} == {socket.gethostname()}
    assert all(w["requestsTotal"] >= 0 and w["connections"] == 0 for w in workers)
    gateway.stop()
    deadline = time.monotonic() + 10
    while listed():  # each worker said it was leaving
        assert time.monotonic() < deadline, "stopped gateways still listed"
        time.sleep(0.2)
