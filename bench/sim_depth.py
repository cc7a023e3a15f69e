"""The books of the default demo, measured and drawn: the default simulation on every market,
fast-forwarded (a fake clock, one tick per step), with each major book's first ten levels per
side (in BTC-equivalent), its touch spread, and how many levels a 0.1 BTC market order would
walk, sampled once a simulated second. The figure in docs/simulation.md:

    python -m bench.sim_depth --out docs/simulation-depth.png          # 30 s, a few seconds

``--seconds`` (how long the market runs before the figure is drawn; the statistics cover every
second of it), ``--seed`` and ``--config`` (a TOML file with a [simulation] section) change
what is simulated; ``--no-plot`` skips the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from tradehall import operations as ops
from tradehall.config import load_config
from tradehall.engine.book import OrderBook
from tradehall.exchange import Exchange
from tradehall.secretbox import SecretBox
from tradehall.sim.profile import FIRST_LEVELS
from tradehall.sim.runner import Market, Simulation
from tradehall.sim.venue import FuturesVenue, SpotVenue
from tradehall.store.sqlite import SQLiteStore
from tradehall.store.writer import GroupCommitter

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MAJORS = ("BTCUSDT", "ETHUSDT", "E-BTC-USDT", "E-ETH-USDT", "E-BTC-USD")
DRAWN = ("BTCUSDT", "E-ETH-USDT")
A_TENTH_BTC = 0.1
BAND_BTC = (20, 100)
"""docs/simulation.md: what each side's first ten levels hold together, in BTC-equivalent."""


@dataclass
class Side:
    prices: list[float]
    """Quote per base, best first."""
    notional: list[float]
    """Each level's value in the quote currency."""


@dataclass
class Stats:
    first_ten_btc: list[float] = field(default_factory=list)
    spread_bps: list[float] = field(default_factory=list)
    levels_for_a_tenth: list[int] = field(default_factory=list)


def side_of(market: Market, book: OrderBook, bids: bool) -> Side:
    """One side of ``market``'s book in quote notional."""
    levels = list((book.bids if bids else book.asks).iter_levels())
    venue = market.venue
    prices = [venue.price_of(level.price) for level in levels]
    if isinstance(venue, SpotVenue):
        decimals = venue.pair.quote_decimals
        values = [venue.pair.quote_amount(lv.price, lv.total) / 10**decimals for lv in levels]
    else:
        assert isinstance(venue, FuturesVenue)
        values = [venue.contract.money(lv.total, lv.price) / 1e8 for lv in levels]
    return Side(prices, values)


def levels_walked(side: Side, notional: float) -> int:
    """How many levels a market order worth ``notional`` in the quote takes."""
    for n, value in enumerate(side.notional, start=1):
        notional -= value
        if notional <= 0:
            return n
    return len(side.notional) + 1  # the book is too thin for it


async def simulate(
    seconds: float, seed: int, config: Path | None
) -> tuple[dict[str, Stats], dict[str, tuple[Side, Side]], dict[str, str]]:
    cfg = load_config(config)
    settings = replace(cfg.simulation, seed=seed)
    work = Path(tempfile.mkdtemp(prefix="tradehall-sim-depth-"))
    store = SQLiteStore(work / "t.db", "normal")
    store.migrate()
    exchange = Exchange(cfg, store, secret_box=SecretBox(SecretBox.new_key()))
    exchange.recover()
    now = [START_MS]
    committer = GroupCommitter(exchange)
    ops.ensure_demo(exchange, now[0])
    sim = Simulation(exchange, committer, lambda: now[0], settings)
    await sim.setup()
    markets = {m.symbol: m for m in sim.markets}
    stats = {symbol: Stats() for symbol in MAJORS if symbol in markets}
    every = max(1, 1000 // settings.tick_ms)
    for step in range(int(seconds * 1000 // settings.tick_ms)):
        now[0] += settings.tick_ms
        await sim.tick()
        if step % every == every - 1:
            sample(exchange, markets, stats)
    books = {s: sides(exchange, markets[s]) for s in DRAWN if s in markets}
    await committer.flush()
    committer.close()
    report = ops.audit(exchange)
    states = {p.name: p.state for p in sim.participants()}
    store.close()
    states["audit"] = "OK" if report["ok"] else "; ".join(report["problems"][:3])
    return stats, books, states


def sides(exchange: Exchange, market: Market) -> tuple[Side, Side]:
    engine = exchange.engine
    books = engine.spot.books if isinstance(market.venue, SpotVenue) else engine.futures.books
    book = books[market.symbol]
    return side_of(market, book, True), side_of(market, book, False)


def sample(exchange: Exchange, markets: dict[str, Market], stats: dict[str, Stats]) -> None:
    btc_bid, btc_ask = sides(exchange, markets["BTCUSDT"])
    btc = (btc_bid.prices[0] + btc_ask.prices[0]) / 2
    for symbol, s in stats.items():
        bids, asks = sides(exchange, markets[symbol])
        mid = (bids.prices[0] + asks.prices[0]) / 2
        s.spread_bps.append((asks.prices[0] - bids.prices[0]) / mid * 10_000)
        for side in (bids, asks):
            s.first_ten_btc.append(sum(side.notional[:FIRST_LEVELS]) / btc)
            if symbol == "BTCUSDT":
                s.levels_for_a_tenth.append(levels_walked(side, A_TENTH_BTC * mid))


def plot(books: dict[str, tuple[Side, Side]], seconds: float, out: Path) -> None:
    """Each drawn book's cumulative depth (with the band its first ten levels are held to)
    and its levels' sizes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    btc_bids, btc_asks = books["BTCUSDT"]
    btc = (btc_bids.prices[0] + btc_asks.prices[0]) / 2
    fig, axes = plt.subplots(2, len(books), figsize=(6 * len(books), 7.5), squeeze=False)
    for col, (symbol, (bids, asks)) in enumerate(books.items()):
        depth, levels = axes[0][col], axes[1][col]
        mid = (bids.prices[0] + asks.prices[0]) / 2
        for side, colour, label in ((bids, "tab:green", "bids"), (asks, "tab:red", "asks")):
            bps = [(p - mid) / mid * 10_000 for p in side.prices]
            total, cumulative = 0.0, []
            for value in side.notional:
                total += value
                cumulative.append(total / 1e6)
            depth.step(bps, cumulative, where="post", color=colour, label=label)
            depth.fill_between(bps, cumulative, step="post", color=colour, alpha=0.2)
            tenth = bps[FIRST_LEVELS - 1]
            depth.axvline(tenth, color=colour, linestyle=":", linewidth=0.8)
            signed = -1 if side is bids else 1
            xs = [signed * (i + 0.5) for i in range(len(side.notional))]
            levels.bar(xs, [v / 1e6 for v in side.notional], width=0.8, color=colour)
        for edge in BAND_BTC:
            depth.axhline(edge * btc / 1e6, color="grey", linestyle="--", linewidth=0.8)
        depth.text(0, BAND_BTC[0] * btc / 1e6, "20 BTC-eq.", ha="center", va="bottom")
        depth.text(0, BAND_BTC[1] * btc / 1e6, "100 BTC-eq.", ha="center", va="bottom")
        depth.set_title(f"{symbol}: cumulative depth after {seconds:g} s (default demo)")
        depth.set_xlabel("distance from the mid (bps); dotted: the tenth level, dashed: its band")
        depth.set_ylabel("cumulative quote notional (millions)")
        depth.legend(loc="upper center")
        levels.set_title(f"{symbol}: each level's size (bids left, asks right)")
        levels.set_xlabel("level from the touch")
        levels.set_ylabel("quote notional (millions)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    median = statistics.median(ordered)
    return f"min {ordered[0]:.1f}, median {median:.1f}, max {ordered[-1]:.1f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sim_depth", description=__doc__)
    p.add_argument("--out", type=Path, default=Path("simulation-depth.png"))
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--config", type=Path)
    p.add_argument("--no-plot", action="store_true")
    args = p.parse_args(argv)
    stats, books, states = asyncio.run(simulate(args.seconds, args.seed, args.config))
    print(f"{args.seconds:g} simulated seconds, sampled each second:")
    for symbol, s in stats.items():
        print(
            f"  {symbol}: first ten levels per side {quantiles(s.first_ten_btc)} BTC-equivalent;"
            f" spread {quantiles(s.spread_bps)} bps"
        )
    walked = stats["BTCUSDT"].levels_for_a_tenth
    print(f"  a 0.1 BTC market order on BTCUSDT walks at most {max(walked)} level(s)")
    inactive = [name for name, state in states.items() if name != "audit" and state != "active"]
    print(f"  out of funds: {inactive or 'none'}; audit {states['audit']}")
    if not args.no_plot:
        plot(books, args.seconds, args.out)
        print(f"{args.out}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
