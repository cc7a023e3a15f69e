"""The ``[sandbox]`` section of the configuration: self-service accounts (docs/api.md,
"Self-service accounts"), validated like the rest of config.py."""

from __future__ import annotations

from decimal import Decimal

from tradehall.config import (
    AdminSettings,
    SandboxSettings,
    _Document,
    _Table,
    asset_amounts,
)
from tradehall.engine.markets import MarketsSpec

_KEYS = ("self_service", "spot", "futures", "faucet_per_day", "max_accounts", "key_expiry_s")
MAX_FAUCET_PER_DAY = 100
MAX_KEY_EXPIRY_S = 10 * 365 * 86_400


def parse_sandbox(
    doc: _Document, value: object, markets: MarketsSpec, admin: AdminSettings
) -> SandboxSettings:
    table = _Table(doc, doc.table(value, "sandbox"), "sandbox")
    doc.check_keys(table.values, "sandbox", _KEYS)
    d = SandboxSettings()
    spot = _funds(table, "spot", markets, admin, coins=False)
    futures = _funds(table, "futures", markets, admin, coins=True)
    return SandboxSettings(
        self_service=table.boolean("self_service", d.self_service),
        spot=spot,
        futures=futures,
        faucet_per_day=table.integer("faucet_per_day", 0, MAX_FAUCET_PER_DAY, d.faucet_per_day),
        max_accounts=table.integer("max_accounts", 1, 1_000_000, d.max_accounts),
        key_expiry_s=table.integer("key_expiry_s", 1, MAX_KEY_EXPIRY_S, d.key_expiry_s),
    )


def _funds(
    table: _Table, key: str, markets: MarketsSpec, admin: AdminSettings, *, coins: bool
) -> dict[str, Decimal]:
    """Starting funds: exact in each asset's units, and each a deposit ``[admin]
    max_deposit`` lets through (a new account's funds are deposits like any other)."""
    funds = asset_amounts(table, key, markets, coins=coins)
    for asset, amount in funds.items():
        places = markets.assets[asset].decimals
        table.units(key, amount, places, f"{asset} has {places} decimals")
        ceiling = admin.deposit_ceiling(asset)
        if ceiling is not None and amount > ceiling:
            raise table.error(
                key, f"{asset}: {amount} is above [admin] max_deposit ({ceiling} {asset})"
            )
    return funds
