"""A simulated day of the default simulation on one market, in fast-forward (a fake clock
advances one tick per step; nothing waits for the wall clock), plotted: the reference path,
the traded price, and the spread of the book. The figure in docs/simulation.md:

    python -m bench.sim_day --out docs/simulation-day.png      # about a minute

``--symbol`` (``all``: every market simulated, the first one plotted), ``--hours``, ``--seed``
and ``--config`` (a TOML file with a [simulation]
section, e.g. a replay) change what is simulated.

``--retention on`` prunes as a server would (the configuration's ``[retention]``, a pass every
``interval_s`` of simulated time); the size of the data folder at the end is printed either
way, and ``--no-plot`` skips the figure (the storage bound in docs/storage.md):

    python -m bench.sim_day --symbol all --hours 6 --retention on --no-plot
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from tradehall import operations as ops
from tradehall.config import load_config
from tradehall.exchange import Exchange
from tradehall.retention import Pruner
from tradehall.secretbox import SecretBox
from tradehall.sim.runner import Simulation
from tradehall.store.sqlite import SQLiteStore
from tradehall.store.writer import GroupCommitter
from tradehall.units import pow10

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SAMPLE_EVERY_S = 60


class Clock:
    def __init__(self) -> None:
        self.now = START_MS

    def __call__(self) -> int:
        return self.now


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir() if f.is_file())


async def simulate(
    symbol: str, hours: float, seed: int, config: Path | None, retention: bool = False
) -> dict[str, list[float]]:
    cfg = load_config(config)
    markets = (symbol,) if symbol != "all" else ()
    settings = replace(cfg.simulation, seed=seed, markets=markets)
    work = Path(tempfile.mkdtemp(prefix="tradehall-sim-day-"))
    store = SQLiteStore(work / "t.db", "normal")
    store.migrate()
    exchange = Exchange(cfg, store, secret_box=SecretBox(SecretBox.new_key()))
    exchange.recover()
    clock = Clock()
    committer = GroupCommitter(exchange)
    pruner = Pruner(exchange, committer, clock, replace(cfg.retention, enabled=retention))
    prune_every = max(1, cfg.retention.interval_s * 1000 // settings.tick_ms)
    pruned: dict[str, int] = {}
    peak = 0
    sim = Simulation(exchange, committer, clock, settings)
    await sim.setup()
    market = sim.markets[0]
    symbol = market.symbol
    places = pow10(cfg.markets.pairs[symbol].price_precision)
    book = exchange.engine.spot.books[symbol]
    series: dict[str, list[float]] = {"hour": [], "reference": [], "last": [], "spread_bps": []}
    every = max(1, SAMPLE_EVERY_S * 1000 // settings.tick_ms)
    for step in range(int(hours * 3_600_000 // settings.tick_ms)):
        clock.now += settings.tick_ms
        await sim.tick()
        if retention and step % prune_every == prune_every - 1:
            await committer.flush()
            for kind, n in (await pruner.run_pass()).items():
                pruned[kind] = pruned.get(kind, 0) + n
        if step % every:
            continue
        peak = max(peak, folder_bytes(work))
        bid, ask = book.bids.best(), book.asks.best()
        last = exchange.engine.spot.last_price.get(symbol, 0) / places
        series["hour"].append((clock.now - START_MS) / 3_600_000)
        series["reference"].append(market.venue.price_of(market.ref))
        series["last"].append(last or float("nan"))  # nan: nothing traded yet
        if bid is not None and ask is not None:
            mid = (bid.price + ask.price) / 2
            series["spread_bps"].append((ask.price - bid.price) / mid * 10_000)
        else:
            series["spread_bps"].append(float("nan"))
    await committer.flush()
    committer.close()
    report = ops.audit(exchange)
    tables = store.table_stats()
    space = store.storage_stats()
    store.close()
    size = folder_bytes(work)
    print(
        f"retention {'on' if retention else 'off'}: data folder {size / 1e6:.1f} MB at the end"
        f" (closed), {peak / 1e6:.1f} MB at most while running (WAL included);"
        f" rows: {', '.join(f'{t} {n}' for t, (n, _) in tables.items() if n)};"
        f" pruned: {pruned or 'nothing'}; files: {space['files']},"
        f" free pages {space['freePages']}, auto_vacuum {space['autoVacuum']}"
    )
    print(
        f"{hours:g} simulated hours on {', '.join(m.symbol for m in sim.markets)}:"
        f" {sum(p.counters.orders for p in sim.participants())} orders;"
        f" out of funds: {[p.name for p in sim.participants() if p.state != 'active'] or 'none'};"
        f" audit {'OK' if report['ok'] else 'VIOLATIONS: ' + '; '.join(report['problems'][:3])}"
    )
    return series


def plot(series: dict[str, list[float]], symbol: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(10, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    top.plot(series["hour"], series["reference"], label="reference (GBM path)", linewidth=1)
    top.plot(series["hour"], series["last"], label="last trade", linewidth=0.8, alpha=0.8)
    top.set_ylabel(f"{symbol} price")
    top.legend(loc="upper left")
    top.set_title(f"A simulated day on {symbol} (default [simulation] settings)")
    bottom.plot(series["hour"], series["spread_bps"], color="tab:red", linewidth=0.8)
    bottom.set_ylabel("spread (bps)")
    finite = [v for v in series["spread_bps"] if v == v]
    bottom.set_ylim(0, max(finite, default=1.0) * 2)
    bottom.ticklabel_format(axis="y", useOffset=False)
    bottom.set_xlabel("hour")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sim_day", description=__doc__)
    p.add_argument("--out", type=Path, default=Path("simulation-day.png"))
    p.add_argument("--symbol", default="BTCUSDT")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--config", type=Path)
    p.add_argument("--retention", choices=("on", "off"), default="off")
    p.add_argument("--no-plot", action="store_true")
    args = p.parse_args(argv)
    series = asyncio.run(
        simulate(args.symbol, args.hours, args.seed, args.config, args.retention == "on")
    )
    if args.no_plot:
        return 0
    plot(series, args.symbol, args.out)
    spreads = sorted(s for s in series["spread_bps"] if s == s)
    print(
        f"{args.out}: {len(series['hour'])} samples; price {series['reference'][0]:.2f} ->"
        f" {series['reference'][-1]:.2f}; median spread {spreads[len(spreads) // 2]:.2f} bps"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
