"""What the price guards cost: the index tick per contract, and the price band on placements.

    python -m bench.price_guards [--contracts 10,100] [--sources 4] [--ticks 300]
                                 [--commands 200000] [--rounds 3] [--json]

- ``index tick``: an engine with that many contracts (copies of E-BTC-USDT indexed on one
  BTCUSDT book), each with ``--sources`` sources (the spot ``mid`` and ``last`` and feeds,
  every feed pushed a new price each second); CPU of the scheduler's tick per contract, which
  is flat when it does not grow with the contracts.
- ``band``: the engine benchmark's command stream (part 1 of ``python -m bench``, on
  BTCUSDT) applied with the spot price band off and on (its reference set to the stream's
  mid: every order of the stream is inside it), alternated ``--rounds`` times; commands per
  CPU-second each way, and the cost of the check as the median of each round's off/on pair
  (goal: at most 2 %).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from dataclasses import replace
from typing import Any

from bench.common import MID_TICKS, SYMBOL
from bench.engine_bench import EngineSpec, build_stream, fresh_engine, throughput_pass
from tradehall.config import load_config
from tradehall.engine.commands import Deposit, FuturesTick, PlaceOrder, SetIndexPrice
from tradehall.engine.contracts import IndexSpec
from tradehall.engine.engine import Engine
from tradehall.engine.futures_model import PriceReference
from tradehall.engine.markets import MarketsSpec

T0 = 1_700_000_000_000
INDEX = 300_000


def contracts_markets(count: int, sources: int) -> MarketsSpec:
    markets = load_config().markets
    base = markets.contracts["E-BTC-USDT"]
    feeds = tuple((f"feed{i}", 1) for i in range(max(0, sources - 2)))
    index = IndexSpec(weights=(("mid", 2), ("last", 1), *feeds)[:sources])
    contracts = {
        f"E-B{i}-USDT": replace(base, id=i + 1, symbol=f"E-B{i}-USDT", index=index)
        for i in range(count)
    }
    return replace(markets, contracts=contracts)


def index_tick(count: int, sources: int, ticks: int) -> dict[str, Any]:
    engine = Engine(contracts_markets(count, sources))
    maker, taker = 1, 2
    for user in (maker, taker):
        engine.apply(Deposit(T0, user, "USDT", 10**9 * 10**8, f"u{user}"))
        engine.apply(Deposit(T0, user, "BTC", 10**4 * 10**8, f"b{user}"))
    for level in range(40):  # a book deep enough for the mid at depth
        for side, sign in (("BUY", -1), ("SELL", 1)):
            price = MID_TICKS + sign * (100 + level * 100)
            engine.apply(PlaceOrder(T0, maker, SYMBOL, side, "LIMIT", price, 500_000))
    engine.apply(PlaceOrder(T0, maker, SYMBOL, "SELL", "LIMIT", MID_TICKS, 1_000))
    engine.apply(PlaceOrder(T0, taker, SYMBOL, "BUY", "LIMIT", MID_TICKS, 1_000))
    feeds = [name for name, _ in engine.futures.contracts[f"E-B{0}-USDT"].index.weights]
    feeds = [name for name in feeds if name not in ("mid", "last")]
    symbols = list(engine.futures.contracts)
    cpu = 0.0
    gc.collect()
    for tick in range(1, ticks + 1):
        ts = T0 + tick * 1_000
        for symbol in symbols:
            for n, feed in enumerate(feeds):
                price = INDEX + (tick + n) % 7 - 3
                engine.apply(SetIndexPrice(ts, symbol, price, feed))
        began = time.process_time()
        engine.apply(FuturesTick(ts))
        cpu += time.process_time() - began
    used = sum(s.status == "used" for s in engine.futures.states[symbols[0]].sources.values())
    return {
        "contracts": count,
        "sources": sources,
        "sources_used": used,
        "ticks": ticks,
        "us_per_contract_tick": cpu / ticks / count * 1e6,
        "ms_per_tick": cpu / ticks * 1e3,
    }


def banded(markets: MarketsSpec, band: bool) -> MarketsSpec:
    pairs = {
        symbol: replace(pair, price_band=pair.price_band if band else 0)
        for symbol, pair in markets.pairs.items()
    }
    return replace(markets, pairs=pairs)


def band_cost(commands: int, rounds: int) -> dict[str, Any]:
    markets = load_config().markets
    spec = EngineSpec(commands=commands, accounts=1_000, depth=2_000)
    seed, cmds, _, _ = build_stream(banded(markets, False), spec)
    runs: dict[str, list[float]] = {"off": [], "on": []}
    rejected: dict[str, int] = {}
    for _ in range(rounds):
        for name in ("off", "on"):
            engine = fresh_engine(banded(markets, name == "on"), spec, seed)
            if name == "on":  # the reference a minute of ticks at the stream's mid gives
                reference = PriceReference(SYMBOL, [(T0, MID_TICKS)], MID_TICKS)
                engine.spot.set_reference(reference)
            result = throughput_pass(engine, cmds)
            runs[name].append(result["commands_per_cpu_s"])
            rejected[name] = result["rejected"]
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    # Each round's pair ran back to back: its ratio is what the machine's drift disturbs least.
    pairs = [b / a for a, b in zip(runs["off"], runs["on"], strict=True)]
    return {
        "commands": commands,
        "rounds": rounds,
        "off_commands_per_cpu_s": off,
        "on_commands_per_cpu_s": on,
        "cost": 1 - statistics.median(pairs),
        "pair_costs": [round(1 - r, 4) for r in pairs],
        "rejected": rejected,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.price_guards", description=__doc__)
    p.add_argument("--contracts", default="10,100")
    p.add_argument("--sources", type=int, default=4)
    p.add_argument("--ticks", type=int, default=300)
    p.add_argument("--commands", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    ticks = [index_tick(int(n), args.sources, args.ticks) for n in args.contracts.split(",")]
    band = band_cost(args.commands, args.rounds)
    report = {"index_tick": ticks, "band": band}
    if args.json:
        print(json.dumps(report))
        return
    for row in ticks:
        print(
            f"index tick: {row['contracts']} contracts x {row['sources']} sources"
            f" ({row['sources_used']} used): {row['us_per_contract_tick']:.1f} us per contract,"
            f" {row['ms_per_tick']:.2f} ms per tick"
        )
    print(
        f"band: off {band['off_commands_per_cpu_s']:,.0f} / on {band['on_commands_per_cpu_s']:,.0f}"
        f" commands per CPU-second (medians of {band['rounds']}); cost, the median of the"
        f" rounds' pairs: {band['cost']:.1%};"
        f" refused off {band['rejected']['off']}, on {band['rejected']['on']}"
    )


if __name__ == "__main__":
    main()
