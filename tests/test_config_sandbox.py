"""The ``[sandbox]`` section (self-service accounts) and its rate limits in ``[limits]``."""

from __future__ import annotations

from decimal import Decimal
from importlib import resources

import pytest

from tradehall.config import ConfigError, LimitSettings, SandboxSettings, load_config, parse_config

BUILTIN = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")


def parsed(extra: str) -> SandboxSettings:
    return parse_config(BUILTIN + "\n" + extra + "\n", "my.toml").sandbox


def test_off_by_default_with_the_demo_accounts_funds() -> None:
    config = load_config()
    assert config.sandbox == SandboxSettings()
    assert not config.sandbox.self_service
    assert (config.sandbox.spot, config.sandbox.futures) == ({}, {})  # the demo account's
    assert (config.limits.self_service_per_ip, config.limits.self_service_global) == (
        LimitSettings().self_service_per_ip,
        LimitSettings().self_service_global,
    )


def test_every_key() -> None:
    text = """[sandbox]
self_service = true
spot = { usdt = "5000", BTC = 0.5 }
futures = { USDT = "1000" }
faucet_per_day = 0
max_accounts = 20
key_expiry_s = 3600

[limits]
self_service_per_ip = [1, 60]
self_service_global = [10, 60]
"""
    config = parse_config(BUILTIN + "\n" + text, "my.toml")
    assert config.sandbox == SandboxSettings(
        self_service=True,
        spot={"USDT": Decimal("5000"), "BTC": Decimal("0.5")},
        futures={"USDT": Decimal("1000")},
        faucet_per_day=0,
        max_accounts=20,
        key_expiry_s=3600,
    )
    assert (config.limits.self_service_per_ip, config.limits.self_service_global) == (
        (1, 60),
        (10, 60),
    )


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("[sandbox]\nself_service = 1", "sandbox.self_service: must be true or false"),
        ('[sandbox]\nspot = { DOGE = "1" }', "sandbox.spot: 'DOGE' is not an asset"),
        ('[sandbox]\nfutures = { ETH = "1" }', "sandbox.futures: 'ETH' is not a margin coin"),
        ('[sandbox]\nspot = { USDT = "-1" }', "sandbox.spot: USDT: must not be negative"),
        ('[sandbox]\nspot = { BTC = "0.000000001" }', "more than 8 decimal places"),
        ("[sandbox]\nfaucet_per_day = 101", "sandbox.faucet_per_day: must be between 0 and 100"),
        ("[sandbox]\nmax_accounts = 0", "sandbox.max_accounts: must be between 1 and"),
        ("[sandbox]\nkey_expiry_s = 0", "sandbox.key_expiry_s: must be between 1 and"),
        ("[sandbox]\nself_servce = true", "did you mean 'self_service'"),
        ("[limits]\nself_service_per_ip = [1]", "limits.self_service_per_ip: must be [requests"),
        ("[limits]\nself_service_global = [0, 60]", "limits.self_service_global: must be"),
    ],
)
def test_mistakes_name_the_field(extra: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parsed(extra)
    assert problem in str(info.value)
    assert str(info.value).startswith("my.toml:")


def test_funds_within_the_deposit_ceiling() -> None:
    """A new account's funds are deposits: ``[admin] max_deposit`` bounds them too."""
    capped = BUILTIN.replace("[admin]\n", '[admin]\nmax_deposit = { USDT = "100" }\n')
    with pytest.raises(ConfigError) as info:
        parse_config(capped + '\n[sandbox]\nfutures = { USDT = "1000" }\n', "my.toml")
    assert "sandbox.futures: USDT: 1000 is above [admin] max_deposit (100 USDT)" in str(info.value)
