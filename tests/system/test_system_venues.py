"""Two venues on one Redis, with real processes: a production venue and its testnet (a copy of
its data folder: the same API keys and secrets), each an engine behind gateways, both pointed
at one Redis by the same config. Neither sees the other's rate limits, bans or signatures,
while the gateways of one venue share theirs (the engine tells them the venue's namespace)."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import coredis
import pytest

import tradehall
from support import ServerProcess, nats_unreachable, start_engine, start_gateway
from tradehall.client.signing import request_path_for_signing, sign, signature_payload

REDIS = "redis://127.0.0.1:6379"
TIME = "/spot/open/sapi/v1/time"
PING = "/spot/open/sapi/v1/ping"
ACCOUNT = "/spot/open/sapi/v1/account"


@pytest.fixture
def stopped() -> Iterator[list[ServerProcess]]:
    processes: list[ServerProcess] = []
    yield processes
    for process in processes:
        process.stop(signal.SIGKILL)


def needs_redis_and_nats() -> None:
    try:
        socket.create_connection(("127.0.0.1", 6379), 1).close()
    except OSError:
        pytest.skip("no Redis on 127.0.0.1:6379: venues sharing one Redis untested")
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)


def shared_config(path: Path, ban_seconds: int) -> Path:
    default = (Path(tradehall.__file__).parent / "default_config.toml").read_text()
    path.write_text(
        default + f'\n[limits]\nstorage = "{REDIS}"\npublic_per_ip = [8, 4]\nban_after = 3\n'
        f"ban_seconds = {ban_seconds}\n"
    )
    return path


def signed_headers(demo: dict[str, Any]) -> dict[str, str]:
    ts = str(int(time.time() * 1000))
    payload = signature_payload(ts, "GET", request_path_for_signing(ACCOUNT, ""), b"")
    return {
        "X-CH-APIKEY": demo["apiKey"],
        "X-CH-TS": ts,
        "X-CH-SIGN": sign(demo["secret"], payload),
    }


def get(url: str, headers: dict[str, str]) -> tuple[int, Any]:
    """(status, JSON body) of one plain GET, on a connection of its own."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def status(url: str) -> int:
    return get(url, {})[0]


async def redis_keys(pattern: str) -> list[str]:
    return list(await coredis.Redis.from_url(REDIS, decode_responses=True).keys(pattern))


def test_two_venues_on_one_redis_share_no_limit_ban_or_signature(
    tmp_path: Path, stopped: list[ServerProcess]
) -> None:
    needs_redis_and_nats()
    # Unusual limits, so that the keys this test writes are its own (and bans end soon).
    ban_seconds = 30 + uuid.uuid4().int % 30
    config = str(shared_config(tmp_path / "config.toml", ban_seconds))
    prod, testnet = tmp_path / "prod", tmp_path / "testnet"
    first = start_engine(prod, f"test-{uuid.uuid4().hex}", "--demo", "--config", config)
    stopped.append(first)
    assert first.demo is not None
    demo = first.demo
    first.stop()
    shutil.copytree(prod, testnet, ignore=shutil.ignore_patterns("server.json"))

    venues: dict[str, list[ServerProcess]] = {}
    for name, data in (("prod", prod), ("testnet", testnet)):
        subject = f"test-{name}-{uuid.uuid4().hex}"
        stopped.append(start_engine(data, subject, "--config", config))
        venues[name] = []
        for workers in (2, 1) if name == "prod" else (2,):
            gateway = start_gateway(subject, "--config", config, workers=workers, rate_limits=True)
            stopped.append(gateway)
            venues[name].append(gateway)
    (prod_a, prod_b), (test_a,) = venues["prod"], venues["testnet"]

    # One signed request, its bytes sent to each venue: new on the testnet, replayed on prod.
    headers = signed_headers(demo)
    assert get(prod_a.url + ACCOUNT, headers)[0] == 200
    on_testnet = get(test_a.url + ACCOUNT, headers)
    assert on_testnet[0] == 200 and "balances" in on_testnet[1], on_testnet
    replayed = get(prod_b.url + ACCOUNT, headers)
    assert replayed[0] == 401 and replayed[1]["code"] == -1022, replayed

    # 127.0.0.1 earns a ban on prod: through one gateway, it holds on every prod gateway worker.
    answers: list[int] = []
    while len(answers) < 40 and 418 not in answers:
        answers.append(status(prod_a.url + TIME))
    assert answers[-1] == 418, answers
    assert [status(prod_a.url + PING) for _ in range(6)] == [418] * 6  # both workers
    assert status(prod_b.url + PING) == 418
    # The testnet's clients never earned one, nor spent their public budget.
    assert [status(test_a.url + PING) for _ in range(4)] == [200] * 4

    ban = f"TH-BAN/127.0.0.1/1/{ban_seconds}/second"
    assert len(asyncio.run(redis_keys(f"tradehall:*:{ban}"))) == 1  # prod's, in its namespace
    assert asyncio.run(redis_keys(f"LIMITS:{ban}")) == []
