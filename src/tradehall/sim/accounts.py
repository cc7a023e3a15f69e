"""The simulation's participants as accounts: their names, and the deposits that funded them
(one per asset, under a fixed tx id, so a restart never funds them twice and
``tradehall account reset`` can give a participant back its own starting funds)."""

from __future__ import annotations

ROLES = ("maker", "taker")


def participant_name(role: str, symbol: str) -> str:
    """``sim-maker-BTCUSDT``: the user a market's maker (or taker) trades as."""
    return f"sim-{role}-{symbol}"


def participant_market(name: str) -> str | None:
    """The market a participant's user name belongs to; None for any other user."""
    for role in ROLES:
        prefix = participant_name(role, "")
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return None


def funding_tx(name: str, asset: str) -> str:
    """The tx id of the deposit that funded participant ``name`` in ``asset`` (a top-up of a
    data folder funded by smaller amounts goes under ``ops.topup_tx`` of it)."""
    return f"{name}-{asset}"
