"""The replay samples shipped in tradehall/sim/data (its README.md): one synthetic BTCUSDT
tape, made here from a seeded generator (nothing is downloaded), written in each history
format the simulation reads. Regenerate them with::

    python -m tradehall.sim.samples src/tradehall/sim/data

The tape: four hours from 2025-01-01T00:00:00Z, starting at 95,000.00 USDT. The volatility
clusters (its logarithm is an autoregressive process, second by second), trades arrive more
often when it is high, and at minute 7 the price drops 0.6 % within a few seconds. Only
``random()`` of a seeded ``random.Random`` is drawn from (its sequence is the one that Python
guarantees across versions), so the files come out the same everywhere.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path

START_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z
START_PRICE = 9_500_000  # cents
MINUTES = 240
AGGTRADE_MINUTES = 10
ANNUAL_VOL = 0.5
RATE = 2.0  # trades per second at the average volatility
YEAR_S = 365 * 24 * 3600
JUMP_AT_S = 7 * 60 + 20
JUMP = -0.006

KLINES = "binance-klines-btcusdt-1m.csv"
AGGTRADES = "binance-aggtrades-btcusdt.csv"
KLINES_JSON = "klines-btcusdt-1min.jsonl"
AGGTRADES_HEADER = (
    "agg_trade_id,price,quantity,first_trade_id,last_trade_id,transact_time,is_buyer_maker"
)


@dataclass(frozen=True, slots=True)
class Trade:
    ms: int
    price: int
    """Cents."""
    qty: int
    """Satoshi (1e-8 BTC)."""
    buyer_maker: bool
    trades: int
    """Trades aggregated into this one."""


def _normal(rng: random.Random) -> float:
    """Box-Muller, from ``random()`` only."""
    return math.sqrt(-2 * math.log(1 - rng.random())) * math.cos(2 * math.pi * rng.random())


def tape(seed: int = 2025) -> list[Trade]:
    rng = random.Random(seed)
    per_second = ANNUAL_VOL / math.sqrt(YEAR_S)
    log_price = math.log(START_PRICE)
    log_vol = 0.0
    price = START_PRICE
    out: list[Trade] = []
    for second in range(MINUTES * 60):
        log_vol = 0.995 * log_vol + 0.04 * _normal(rng)
        vol = math.exp(log_vol)
        jump = JUMP / 4 if JUMP_AT_S <= second < JUMP_AT_S + 4 else 0.0
        start = log_price
        log_price += per_second * vol * _normal(rng) + jump
        t = 0.0
        while True:
            t += -math.log(1 - rng.random()) / (RATE * vol)
            if t >= 1.0:
                break
            # Within the second, trades move from its start towards its end, with noise.
            mid = start + (log_price - start) * t + per_second * vol * 0.3 * _normal(rng)
            new = round(math.exp(mid))
            buyer_maker = new < price or (new == price and rng.random() < 0.5)
            qty = round(math.exp(_normal(rng) * 1.2) * 2_000_000)  # about 0.02 BTC
            out.append(
                Trade(
                    START_MS + second * 1000 + int(t * 1000),
                    new,
                    max(1, qty),
                    buyer_maker,
                    1 + int(rng.random() * 4),
                )
            )
            price = new
    return out


@dataclass
class Bar:
    open_ms: int
    open: int
    high: int
    low: int
    close: int
    qty: int = 0
    quote: int = 0
    """Cents x satoshi."""
    count: int = 0
    taker_qty: int = 0
    taker_quote: int = 0


def bars(trades: list[Trade], until_ms: int | None = None) -> list[Bar]:
    """One-minute bars of the trades before ``until_ms``; a minute without a trade is flat at
    the last close."""
    out: list[Bar] = []
    for t in trades:
        if until_ms is not None and t.ms >= until_ms:
            break
        minute = t.ms - t.ms % 60_000
        while out and out[-1].open_ms + 60_000 < minute:
            c = out[-1].close
            out.append(Bar(out[-1].open_ms + 60_000, c, c, c, c))
        if not out or out[-1].open_ms != minute:
            out.append(Bar(minute, t.price, t.price, t.price, t.price))
        bar = out[-1]
        bar.high, bar.low, bar.close = max(bar.high, t.price), min(bar.low, t.price), t.price
        bar.qty += t.qty
        bar.quote += t.qty * t.price
        bar.count += t.trades
        if not t.buyer_maker:
            bar.taker_qty += t.qty
            bar.taker_quote += t.qty * t.price
    return out


def _dec(value: int, places: int) -> str:
    sign = "-" if value < 0 else ""
    whole, frac = divmod(abs(value), 10**places)
    return f"{sign}{whole}.{frac:0{places}d}"


def binance_klines(rows: list[Bar]) -> str:
    """Spot layout from 2025 on: no header, times in microseconds, 8 decimals."""
    lines = []
    for b in rows:
        prices = ",".join(_dec(p * 10**6, 8) for p in (b.open, b.high, b.low, b.close))
        lines.append(
            f"{b.open_ms * 1000},{prices},{_dec(b.qty, 8)},{(b.open_ms + 60_000) * 1000 - 1},"
            f"{_dec(b.quote // 100, 8)},{b.count},{_dec(b.taker_qty, 8)},"
            f"{_dec(b.taker_quote // 100, 8)},0"
        )
    return "\n".join(lines) + "\n"


def binance_aggtrades(trades: list[Trade]) -> str:
    """USD-M futures layout: a header line, times in milliseconds, 7 columns."""
    lines = [AGGTRADES_HEADER]
    first = 5_000_000_000
    for i, t in enumerate(trades):
        if t.ms >= START_MS + AGGTRADE_MINUTES * 60_000:
            break
        lines.append(
            f"{3_000_000_000 + i},{_dec(t.price, 2)},{_dec(max(1, t.qty // 100_000), 3)},{first},"
            f"{first + t.trades - 1},{t.ms},{'true' if t.buyer_maker else 'false'}"
        )
        first += t.trades
    return "\n".join(lines) + "\n"


def klines_json(trades: list[Trade]) -> str:
    """Three saved ``/klines?limit=100`` answers, one per line: the first two taken 20 s into
    their last bar (still forming then; the next answer holds it whole), the third after the
    tape's end."""
    answers = []
    for last in (99, 179, MINUTES - 1):
        taken = START_MS + last * 60_000 + (20_000 if last < MINUTES - 1 else 60_000)
        window = bars(trades, taken)[last - 99 : last + 1]
        answers.append(
            json.dumps(
                [
                    {
                        "idx": b.open_ms,
                        "open": _dec(b.open, 2),
                        "close": _dec(b.close, 2),
                        "high": _dec(b.high, 2),
                        "low": _dec(b.low, 2),
                        "vol": _dec(b.qty // 100, 6),
                    }
                    for b in window
                ],
                separators=(",", ":"),
            )
        )
    return "\n".join(answers) + "\n"


def samples() -> dict[str, str]:
    trades = tape()
    return {
        KLINES: binance_klines(bars(trades)),
        AGGTRADES: binance_aggtrades(trades),
        KLINES_JSON: klines_json(trades),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tradehall.sim.samples", description=__doc__)
    p.add_argument("out", type=Path, help="the folder to write the samples to")
    args = p.parse_args(argv)
    for name, text in samples().items():
        (args.out / name).write_text(text, "utf-8")
        print(f"{args.out / name}: {text.count(chr(10))} lines, {len(text.encode())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
