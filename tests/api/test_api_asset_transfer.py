"""The family's transfers between spot and futures through HTTP: ``POST /asset/transfer`` and
``POST /asset/transferQuery``, their envelope, their filters, and that tradehall's own transfer
endpoints are recorded alike."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, BASE_URL, ClientClock, Env, make_exchange
from tradehall.api.app import create_app
from tradehall.client import ApiError, Client

SPOT = "/spot/open/sapi/v1"
T0 = 1_700_000_000_000
DAY = 24 * 3600 * 1000


def data(answer: dict[str, Any]) -> Any:
    assert set(answer) == {"code", "msg", "data"} and answer["code"] == "0", answer
    assert answer["msg"] == "SUCCESS"
    return answer["data"]


def transfers(client: Client, **filters: Any) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = data(client.asset_transfer_query(**filters))["list"]
    return listed


def refused(response: httpx2.Response, code: int) -> None:
    assert (response.status_code, response.json()["code"]) == (400, code), response.text


def usdt_free(client: Client) -> str:
    return str({b["asset"]: b for b in client.account()["balances"]}["USDT"]["free"])


def test_transfer_moves_funds_and_answers_an_id(env: Env) -> None:
    alice = env.trader({"USDT": "1000"})
    first = data(alice.asset_transfer("usdt", "300", "EXCHANGE", "FUTURE"))
    assert set(first) == {"transferId"} and first["transferId"].isdigit()
    assert usdt_free(alice) == "700.00000000"
    env.clock.advance(10)
    second = data(alice.asset_transfer("USDT", Decimal("100.5"), "FUTURE", "EXCHANGE"))
    assert int(second["transferId"]) > int(first["transferId"])
    assert usdt_free(alice) == "800.50000000"
    assert alice.futures_transfer("USDT", "199.5", "futures", "spot")["free"] == "0.00000000"
    env.audit()


def test_transfer_refusals_change_nothing(env: Env) -> None:
    alice = env.trader({"USDT": "1000", "ETH": "1"})
    before = alice.account()
    for body, code in (
        ({"coinSymbol": "USDT", "amount": "1", "fromAccount": "EXCHANGE"}, -1102),
        ({"coinSymbol": "USDT", "amount": "1", "fromAccount": "X", "toAccount": "FUTURE"}, -1102),
        (
            {"coinSymbol": "USDT", "amount": "1", "fromAccount": "FUTURE", "toAccount": "FUTURE"},
            -1102,
        ),
        (
            {"coinSymbol": "ETH", "amount": "1", "fromAccount": "EXCHANGE", "toAccount": "FUTURE"},
            -1102,
        ),
        (
            {"coinSymbol": "NOPE", "amount": "1", "fromAccount": "EXCHANGE", "toAccount": "FUTURE"},
            -1102,
        ),
        (
            {"coinSymbol": "USDT", "amount": "0", "fromAccount": "EXCHANGE", "toAccount": "FUTURE"},
            -1102,
        ),
        (
            {
                "coinSymbol": "USDT",
                "amount": "1.123456789",
                "fromAccount": "EXCHANGE",
                "toAccount": "FUTURE",
            },
            -1111,
        ),
        (
            {
                "coinSymbol": "USDT",
                "amount": "5000",
                "fromAccount": "EXCHANGE",
                "toAccount": "FUTURE",
            },
            -2017,
        ),
        (
            {"coinSymbol": "USDT", "amount": "1", "fromAccount": "FUTURE", "toAccount": "EXCHANGE"},
            -2017,
        ),
    ):
        refused(alice.request("POST", SPOT + "/asset/transfer", body=body), code)
    assert alice.account() == before
    assert transfers(alice, from_account="EXCHANGE", to_account="FUTURE") == []
    reader = env.trader(read_only=True)
    with pytest.raises(ApiError) as info:
        reader.asset_transfer("USDT", "1", "EXCHANGE", "FUTURE")
    assert (info.value.status, info.value.code) == (403, -2015)


def test_query_lists_the_accounts_transfers_newest_first(env: Env) -> None:
    alice = env.trader({"USDT": "1000", "BTC": "1"})
    bob = env.trader({"USDT": "1000"})
    ids = []
    for coin, amount, source, target in (
        ("USDT", "100", "EXCHANGE", "FUTURE"),
        ("BTC", "0.5", "EXCHANGE", "FUTURE"),
        ("USDT", "40", "FUTURE", "EXCHANGE"),
        ("USDT", "10", "EXCHANGE", "FUTURE"),
    ):
        env.clock.advance(1000)
        ids.append(data(alice.asset_transfer(coin, amount, source, target))["transferId"])
    bob.asset_transfer("USDT", "5", "EXCHANGE", "FUTURE")
    env.clock.advance(1000)
    alice.futures_transfer("USDT", "1", "spot", "futures")  # tradehall's extension: listed too

    into = transfers(alice, from_account="EXCHANGE", to_account="FUTURE")
    assert [r["transferId"] for r in into][1:] == [ids[3], ids[1], ids[0]]
    assert into[1] == {
        "transferId": ids[3],
        "fromAccount": "EXCHANGE",
        "toAccount": "FUTURE",
        "coinSymbol": "USDT",
        "createTime": T0 + 4000,
        "amount": "10.00000000",
        "status": "SUCCESS",
    }
    back = transfers(alice, from_account="FUTURE", to_account="EXCHANGE")
    assert [r["transferId"] for r in back] == [ids[2]]
    assert [r["transferId"] for r in transfers(alice, transfer_id=ids[1])] == [ids[1]]
    assert transfers(bob, transfer_id=ids[1]) == []  # another account's transfer
    usdt = transfers(alice, coin="usdt", from_account="EXCHANGE", to_account="FUTURE")
    assert [r["transferId"] for r in usdt][1:] == [ids[3], ids[0]]
    page = transfers(alice, from_account="EXCHANGE", to_account="FUTURE", limit=2, page=2)
    assert [r["transferId"] for r in page] == [ids[1], ids[0]]
    window = transfers(
        alice,
        from_account="EXCHANGE",
        to_account="FUTURE",
        start_time=T0 + 1500,
        end_time=T0 + 4500,
    )
    assert [r["transferId"] for r in window] == [ids[3], ids[1]]
    one = transfers(
        alice,
        from_account="EXCHANGE",
        to_account="FUTURE",
        start_time=T0 + 1500,
        end_time=T0 + 4500,
        limit=1,
    )
    assert [r["transferId"] for r in one] == [ids[3]]
    env.clock.advance(8 * DAY)
    assert transfers(alice, from_account="EXCHANGE", to_account="FUTURE") == []


def test_query_refusals(env: Env) -> None:
    alice = env.trader({"USDT": "1000"})
    for body in (
        {},  # neither transferId nor the accounts
        {"fromAccount": "EXCHANGE"},
        {"fromAccount": "EXCHANGE", "toAccount": "EXCHANGE"},
        {"fromAccount": "EXCHANGE", "toAccount": "FUTURE", "limit": 101},
        {"fromAccount": "EXCHANGE", "toAccount": "FUTURE", "page": 0},
        {"transferId": "x"},
        {
            "fromAccount": "EXCHANGE",
            "toAccount": "FUTURE",
            "startTime": T0,
            "endTime": T0 + 8 * DAY,
        },
    ):
        refused(alice.request("POST", SPOT + "/asset/transferQuery", body=body), -1102)


def test_transfer_ids_survive_a_restart(env: Env) -> None:
    alice = env.trader({"USDT": "1000"})
    first = data(alice.asset_transfer("USDT", "1", "EXCHANGE", "FUTURE"))["transferId"]
    key, secret = alice._builder.api_key, alice._builder._secret
    hash_before = env.exchange.engine.state_hash()
    restarted = make_exchange(env.db_path)
    app = create_app(restarted, clock=env.clock, admin_token=ADMIN_TOKEN, run_scheduler=False)
    with TestClient(app) as http:
        assert restarted.engine.state_hash() == hash_before
        client = Client(BASE_URL, key, secret, http=http, clock=ClientClock(env.clock))
        env.clock.advance(10)
        second = data(client.asset_transfer("USDT", "1", "EXCHANGE", "FUTURE"))["transferId"]
        assert int(second) == int(first) + 1
        listed = transfers(client, from_account="EXCHANGE", to_account="FUTURE")
        assert [r["transferId"] for r in listed] == [second, first]
    restarted.store.close()
