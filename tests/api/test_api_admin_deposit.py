"""``[admin] max_deposit``: a deposit larger than the configured ceiling is refused with a
clear error and deposits nothing, through the admin API (which the CLI and the operator page
use); a bad ceiling in the configuration names its key."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, TEST_SECRET_BOX
from tradehall.api.app import create_app
from tradehall.config import ConfigError, parse_config
from tradehall.exchange import Exchange
from tradehall.store.sqlite import SQLiteStore

DEFAULT_CONFIG = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def with_admin(table: str) -> str:
    return DEFAULT_CONFIG.replace("[admin]\n", f"[admin]\n{table}\n", 1)


def admin_http(tmp_path: Path, table: str) -> Iterator[TestClient]:
    store = SQLiteStore(tmp_path / "tradehall.db", "normal")
    store.migrate()
    config = parse_config(with_admin(table), "my.toml")
    exchange = Exchange(config, store, secret_box=TEST_SECRET_BOX, check_invariants=True)
    exchange.recover()
    app = create_app(exchange, admin_token=ADMIN_TOKEN, run_scheduler=False)
    with TestClient(app, client=("127.0.0.1", 40000)) as http:
        assert http.post("/admin/v1/users", json={"name": "u"}, headers=AUTH).status_code == 200
        yield http
    store.close()


@pytest.fixture
def one_ceiling(tmp_path: Path) -> Iterator[TestClient]:
    yield from admin_http(tmp_path, 'max_deposit = "1000000"')


@pytest.fixture
def per_asset(tmp_path: Path) -> Iterator[TestClient]:
    yield from admin_http(tmp_path, 'max_deposit = { usdt = "1000000", BTC = "2.5" }')


def deposit(http: TestClient, asset: str, amount: str) -> tuple[int, dict[str, object]]:
    body = {"userId": 1, "asset": asset, "amount": amount}
    answer = http.post("/admin/v1/deposit", json=body, headers=AUTH)
    return answer.status_code, answer.json()


def balance(http: TestClient, asset: str) -> str:
    balances = http.get("/admin/v1/balances?userId=1", headers=AUTH).json()["balances"]
    return next((b["free"] for b in balances if b["asset"] == asset), "0")


def test_a_deposit_over_the_ceiling_is_refused_and_changes_nothing(one_ceiling: TestClient) -> None:
    status, answer = deposit(one_ceiling, "USDT", "90000000000")
    assert (status, answer) == (
        400,
        {
            "code": -1102,
            "msg": "a deposit of 90000000000 USDT is above [admin] max_deposit (1000000 USDT):"
            " nothing was deposited",
        },
    )
    assert float(balance(one_ceiling, "USDT")) == 0
    assert deposit(one_ceiling, "USDT", "1000000")[0] == 200  # the ceiling itself is allowed
    assert deposit(one_ceiling, "BTC", "1000000.00000001")[0] == 400  # every asset
    assert float(balance(one_ceiling, "BTC")) == 0


def test_ceilings_per_asset(per_asset: TestClient) -> None:
    assert deposit(per_asset, "btc", "2.50000001")[1]["code"] == -1102
    assert deposit(per_asset, "BTC", "2.5")[0] == 200
    assert deposit(per_asset, "USDT", "1000000.01")[0] == 400
    assert deposit(per_asset, "ETH", "90000000000")[0] == 200  # not listed: no ceiling


@pytest.mark.parametrize(
    ("table", "field", "problem"),
    [
        ('max_deposit = "0"', "admin.max_deposit", "must be above 0"),
        ('max_deposit = "-5"', "admin.max_deposit", "must be above 0"),
        ('max_deposit = "lots"', "admin.max_deposit", "not a decimal number"),
        ("max_deposit = true", "admin.max_deposit", "must be a decimal string or number"),
        ('max_deposit = { DOGE = "5" }', "admin.max_deposit.DOGE", "unknown asset"),
        ('max_deposit = { BTC = "0" }', "admin.max_deposit.BTC", "must be above 0"),
        ('max_depositt = "5"', "admin.max_depositt", "unknown key"),
    ],
)
def test_a_bad_ceiling_names_its_key(table: str, field: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(with_admin(table), "my.toml")
    assert f": {field}: " in str(caught.value) and problem in str(caught.value), caught.value
