"""Replayed histories in the formats people have (data.binance.vision's klines and aggregated
trades CSV, saved /klines answers, tradehall's own CSV): each is read, the simulation's
reference follows it, and the candles the exchange builds from the trades the simulation makes
match the file's within a tick. Bad files are refused naming the file, the line and the field.

The simulation runs tick by tick on a real exchange with a fake clock whose first tick is the
file's first time, so the exchange's bars line up with the file's. Its makers quote one tick
apart (bid at the reference, ask one tick above) with levels no tick's takers can empty."""

from __future__ import annotations

import asyncio
import csv
import json
import tempfile
import zipfile
from bisect import bisect_right
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import FakeClock, make_exchange
from tradehall.config import ConfigError, load_config, parse_config
from tradehall.exchange import Exchange
from tradehall.marketdata.candles import Bar
from tradehall.marketdata.intervals import parse_interval
from tradehall.sim import samples
from tradehall.sim.replay import ReplayError, load_history, with_histories
from tradehall.sim.runner import Simulation
from tradehall.sim.settings import MakerSettings, SimulationSettings, TakerSettings
from tradehall.store.writer import GroupCommitter

BASE = (
    Path(__file__).resolve().parents[2] / "src" / "tradehall" / "default_config.toml"
).read_text()
DATA = Path(__file__).resolve().parents[2] / "src" / "tradehall" / "sim" / "data"
SYMBOL = "BTCUSDT"
MINUTE = 60_000
T0 = 1_735_689_600_000  # 2025-01-01T00:00:00Z
ONE_MIN = parse_interval("1min")


def replay_settings(
    replay: str, folder: Path, tick_ms: int, fmt: str = "auto"
) -> SimulationSettings:
    """BTCUSDT replaying ``replay`` (through the configuration, as a user names it); makers
    one tick apart, 1,000,000 USDT a level, no skew; takers of one unit, three a second on
    average (a tick's takers never empty a level)."""
    extra = (
        f'\n[[simulation.market]]\nsymbol = "{SYMBOL}"\nmodel = "replay"\n'
        f'replay = "{replay}"\nreplay_format = "{fmt}"\n'
    )
    cfg = parse_config(BASE + extra, str(folder / "tradehall.toml"))
    return replace(
        with_histories(cfg.simulation),
        markets=(SYMBOL,),
        tick_ms=tick_ms,
        maker=MakerSettings(
            levels=2,
            spacing_bps=0.0001,
            depth=Decimal(2_000_000),
            variation=0.0,
            inventory_limit=50.0,
            skew=0,
        ),
        taker=TakerSettings(rate=3.0, size_model="uniform", min_size=1, max_size=1),
    )


def run(settings: SimulationSettings, first_ms: int, until_ms: int) -> tuple[Exchange, Simulation]:
    """Ticks from ``first_ms`` (the history's start) up to ``until_ms``; the store closed."""
    exchange = make_exchange(Path(tempfile.mkdtemp()) / "t.db")
    exchange.engine.check_invariants = False
    clock = FakeClock(first_ms - settings.tick_ms)

    async def main() -> Simulation:
        committer = GroupCommitter(exchange)
        sim = Simulation(exchange, committer, clock, settings)
        await sim.setup()
        while clock.now + settings.tick_ms < until_ms:
            clock.advance(settings.tick_ms)
            await sim.tick()
        committer.close()
        return sim

    sim = asyncio.run(main())
    exchange.store.close()
    return exchange, sim


def server_bars(exchange: Exchange, until_ms: int) -> dict[int, Bar]:
    bars = exchange.marketdata.klines(SYMBOL, ONE_MIN, 300, until_ms)
    return {b.open_time: b for b in bars}


def assert_within_a_tick(file: list[Bar], exchange: Exchange) -> None:
    """Every candle of the file has the exchange's bar of its minute, each price the file's
    or one tick above it (a taker's sell meets the bid at the reference, a buy the ask)."""
    built = server_bars(exchange, file[-1].open_time + MINUTE - 1)
    for bar in file:
        got = built.get(bar.open_time)
        assert got is not None, (bar, sorted(built))
        for name in ("open", "high", "low", "close"):
            diff = getattr(got, name) - getattr(bar, name)
            assert 0 <= diff <= 1, (name, bar, got)


def cents(text: str) -> int:
    return round(float(text) * 100)


# ------------------------------------------------------------------ the shipped samples


def test_the_shipped_samples_are_what_the_script_writes() -> None:
    for name, text in samples.samples().items():
        assert (DATA / name).read_text("utf-8") == text, f"regenerate {name}: see its README.md"
    assert "not downloaded" in (DATA / "README.md").read_text()


def test_the_samples_are_told_apart_and_one_tape_in_three_formats(tmp_path: Path) -> None:
    seen = {}
    for name, fmt, kind, rows in (
        (samples.KLINES, "binance-klines", "candles", 240),
        (samples.KLINES_JSON, "klines-json", "candles", 240),
        (samples.AGGTRADES, "binance-aggtrades", "trades", 1191),
        ("btcusdt-1m.csv", "csv", "candles", 240),
    ):
        history = replay_settings(f"builtin:{name}", tmp_path, 500).overrides[SYMBOL].history
        assert history is not None
        assert (history.format, history.kind, history.rows) == (fmt, kind, rows), name
        seen[fmt] = history
    klines, answers = seen["binance-klines"], seen["klines-json"]
    assert klines.start_ms == answers.start_ms == seen["binance-aggtrades"].start_ms == T0
    # The JSON answers, merged (later answers' complete bars replacing forming ones), walk
    # exactly as the klines file does.
    assert (klines.times, klines.prices, klines.end_ms) == (
        answers.times,
        answers.prices,
        answers.end_ms,
    )
    assert klines.end_ms == 240 * MINUTE


def klines_sample_bars(minutes: int) -> list[Bar]:
    with (DATA / samples.KLINES).open() as f:
        rows = list(csv.reader(f))[:minutes]
    out = []
    for r in rows:
        o, h, low, c = (cents(v) for v in r[1:5])
        out.append(Bar(int(r[0]) // 1000, o, h, low, c, 0))
    return out


@pytest.mark.parametrize("name", [samples.KLINES, samples.KLINES_JSON])
def test_a_candles_sample_replays_into_the_same_candles(name: str, tmp_path: Path) -> None:
    file = klines_sample_bars(8)
    exchange, sim = run(replay_settings(f"builtin:{name}", tmp_path, 5_000), T0, T0 + 8 * MINUTE)
    assert_within_a_tick(file, exchange)
    view = sim.status()["markets"][0]
    assert view["replay"]["file"] == f"builtin:{name}" and view["replay"]["round"] == 1
    # The last tick was at 7:55 (clock and history alike); the reference it set, which the
    # next tick's takers meet, is the history's 8:00.
    assert view["replay"]["historyTime"] == T0 + 8 * MINUTE


def held_price(times: list[int], prices: list[int], ms: int) -> int:
    """The file's price at ``ms``: its last trade's at or before it."""
    return prices[bisect_right(times, ms) - 1]


def assert_trades_follow(times: list[int], prices: list[int], exchange: Exchange) -> int:
    """Every trade the exchange made until the file's end (then it loops, scaled to go on from
    its last price) is at the file's price at its time, or a tick above."""
    made = [t for t in exchange.marketdata.recent_trades(SYMBOL, 1000) if t.time <= times[-1]]
    assert 0 < len(made) < 1000
    for trade in made:
        want = held_price(times, prices, trade.time)
        assert 0 <= trade.price - want <= 1, (trade, want)
    return len(made)


def test_the_aggtrades_sample_moves_the_reference_trade_by_trade(tmp_path: Path) -> None:
    with (DATA / samples.AGGTRADES).open() as f:
        rows = list(csv.DictReader(f))
    times = [int(r["transact_time"]) for r in rows]
    prices = [cents(r["price"]) for r in rows]
    until = T0 + 5 * MINUTE
    settings_ = replay_settings(f"builtin:{samples.AGGTRADES}", tmp_path, 500)
    exchange, sim = run(settings_, T0, until)
    assert assert_trades_follow(times, prices, exchange) > 200
    reference = float(sim.status()["markets"][0]["reference"])
    assert cents(str(reference)) == held_price(times, prices, until - 1)


# ------------------------------------------------------------------ properties


@st.composite
def candle_files(draw: st.DrawFn) -> list[Bar]:
    """One-minute candles in cents, some minutes missing, each within a per cent of the last
    (inside the exchange's 5 % price band)."""
    price = draw(st.integers(1_000_000, 10_000_000))
    out: list[Bar] = []
    minute = T0
    for _ in range(draw(st.integers(1, 5))):
        minute += MINUTE * draw(st.sampled_from([0, 0, 0, 1, 2])) if out else 0
        step = price // 400
        o = price + draw(st.integers(-step, step))
        c = o + draw(st.integers(-step, step))
        h = max(o, c) + draw(st.integers(0, step))
        low = min(o, c) - draw(st.integers(0, step))
        out.append(Bar(minute, o, h, low, c, 0))
        price, minute = c, minute + MINUTE
    return out


def without_gaps(bars: list[Bar]) -> list[Bar]:
    out = bars[:1]
    for bar in bars[1:]:
        while out[-1].open_time + MINUTE < bar.open_time:
            c = out[-1].close
            out.append(Bar(out[-1].open_time + MINUTE, c, c, c, c, 0))
        out.append(bar)
    return out


def money(cents_: int, places: int = 2) -> str:
    return f"{cents_ / 100:.{places}f}"


def binance_klines(bars: list[Bar], header: bool, micros: bool) -> str:
    unit = 1000 if micros else 1
    lines = []
    if header:
        lines.append(
            "open_time,open,high,low,close,volume,close_time,quote_volume,count,"
            "taker_buy_volume,taker_buy_quote_volume,ignore"
        )
    for b in bars:
        prices = ",".join(money(p, 8) for p in (b.open, b.high, b.low, b.close))
        close = (b.open_time + MINUTE) * unit - 1
        lines.append(f"{b.open_time * unit},{prices},1.5,{close},100.0,12,0.7,50.0,0")
    return "\n".join(lines) + "\n"


def klines_answers(bars: list[Bar], cut: int, forming: bool) -> str:
    """Two saved answers split at ``cut``, overlapping by one bar: the first answer's last bar
    still forming (only its open so far) when ``forming``."""

    def bar(b: Bar, whole: bool = True) -> dict[str, object]:
        prices = (b.open, b.high, b.low, b.close) if whole else (b.open,) * 4
        o, h, low, c = (money(p) for p in prices)
        return {"idx": b.open_time, "open": o, "close": c, "high": h, "low": low, "vol": "1.0"}

    first = [bar(b) for b in bars[:cut]]
    if forming and first:
        first[-1] = bar(bars[cut - 1], whole=False)
    second = [bar(b) for b in bars[max(0, cut - 1) :]]
    return "\n".join(json.dumps(a, indent=1) for a in (first, second) if a) + "\n"


def own_csv(bars: list[Bar]) -> str:
    lines = ["time,open,high,low,close"]
    for b in bars:
        when = datetime.fromtimestamp(b.open_time / 1000, UTC).isoformat()
        lines.append(f"{when},{','.join(money(p) for p in (b.open, b.high, b.low, b.close))}")
    return "\n".join(lines) + "\n"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bars=candle_files(),
    layout=st.sampled_from(["klines", "klines-header", "klines-us", "json", "json-forming", "csv"]),
    cut=st.integers(1, 5),
)
def test_candles_the_exchange_builds_from_a_replayed_file_match_the_files(
    bars: list[Bar], layout: str, cut: int
) -> None:
    folder = Path(tempfile.mkdtemp())
    if layout.startswith(("json", "csv")):
        # These files do not say the candles' interval (it is taken from their spacing): the
        # /klines answers fill a minute without trades with a flat bar, so these do too.
        bars = without_gaps(bars)
    cut = min(cut, len(bars))
    text = {
        "klines": lambda: binance_klines(bars, header=False, micros=False),
        "klines-header": lambda: binance_klines(bars, header=True, micros=False),
        "klines-us": lambda: binance_klines(bars, header=False, micros=True),
        "json": lambda: klines_answers(bars, cut, forming=False),
        "json-forming": lambda: klines_answers(bars, cut, forming=True),
        "csv": lambda: own_csv(bars),
    }[layout]()
    (folder / "history.txt").write_text(text)
    settings_ = replay_settings("history.txt", folder, 5_000)
    exchange, _ = run(settings_, T0, bars[-1].open_time + MINUTE)
    assert_within_a_tick(bars, exchange)


@st.composite
def trade_files(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Trades (ms, cents) a second or more apart (the simulation's tick), some seconds
    without any, each within half a per cent of the last; at least four (the first tick has
    no quotes to trade against yet)."""
    price = draw(st.integers(1_000_000, 10_000_000))
    times, prices = [], []
    ms = T0
    for _ in range(draw(st.integers(4, 40))):
        times.append(ms)
        prices.append(price)
        ms += 1000 * draw(st.integers(1, 4))
        price += draw(st.integers(-price // 200, price // 200))
    return times, prices


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    trades=trade_files(),
    header=st.booleans(),
    micros=st.booleans(),
    best_match=st.booleans(),
)
def test_a_replayed_aggtrades_file_moves_the_exchanges_trades_trade_by_trade(
    trades: tuple[list[int], list[int]], header: bool, micros: bool, best_match: bool
) -> None:
    times, prices = trades
    lines = [samples.AGGTRADES_HEADER + (",is_best_match" if best_match else "")] if header else []
    for i, (ms, price) in enumerate(zip(times, prices, strict=True)):
        when = ms * 1000 + 123 if micros else ms
        flag = ",True" if best_match else ""
        lines.append(f"{100 + i},{money(price)},0.5,{7 * i},{7 * i + 6},{when},False{flag}")
    folder = Path(tempfile.mkdtemp())
    (folder / "trades.csv").write_text("\n".join(lines) + "\n")
    settings_ = replay_settings("trades.csv", folder, 1_000)
    exchange, _ = run(settings_, T0, times[-1] + 1_001)
    assert_trades_follow(times, prices, exchange)


# ------------------------------------------------------------------ bad files


def kline(minute: int = 0, high: str = "2.0", close_ms: int | None = None) -> str:
    open_ms = T0 + minute * MINUTE
    close_ms = open_ms + MINUTE - 1 if close_ms is None else close_ms
    return f"{open_ms},1.0,{high},0.5,1.5,1,{close_ms},1,1,1,1,0"


KLINE = kline()
AGG = "1,95000.1,0.5,1,1,1735689600000,true,true"
BAD_FILES = [
    (
        "binance-klines",
        "1735689600000,1,2,3\n",
        ":1: columns: 4 columns, a binance-klines row has 12",
    ),
    ("auto", KLINE + "\n" + kline(1, high="x") + "\n", ":2: high: 'x' is not a number"),
    ("auto", kline(high="1.2"), ":1: high: high/low do not contain open/close"),
    ("auto", kline(close_ms=T0 - 1), ":1: close_time: before the open time"),
    (
        "auto",
        KLINE.replace("1735689600000", "17356896000000000000", 1),
        ":1: open_time: 17356896000000000000 is not UNIX time",
    ),
    ("auto", kline(1) + "\n" + KLINE, ":2: time: rows must be in time order"),
    ("auto", KLINE + "\n" + KLINE, ":2: time: a second candle opening at 1735689600000 (line 1)"),
    ("binance-klines", "time,open,high,low,close\n", ":1: columns: 5 columns"),
    (
        "binance-aggtrades",
        "agg_id,p,q,f,l,t,m\n" + AGG[:-5],
        ":1: agg_trade_id: a header line starts with agg_trade_id, got 'agg_id'",
    ),
    ("auto", AGG.replace("true,true", "maybe,true"), ":1: format: cannot tell the format"),
    (
        "binance-aggtrades",
        AGG.replace("true,true", "maybe,true"),
        ":1: is_buyer_maker: must be true or false, got 'maybe'",
    ),
    ("auto", AGG.replace("95000.1", "-3"), ":1: price: must be a positive number, got -3"),
    (
        "auto",
        AGG.replace("173568960", "173568970") + "\n" + AGG,
        ":2: time: rows must be in time order",
    ),
    (
        "binance-aggtrades",
        AGG.replace("1735689600000", "2025-01-01"),
        ":1: transact_time: '2025-01-01' is not an integer",
    ),
    (
        "auto",
        "1,2,3,4,5\n",
        ":1: format: cannot tell the format of a row of 5 columns without a header",
    ),
    ("auto", "\n", ":1: format: empty first line"),
    (
        "auto",
        '[{"idx": 1, "open": "1", "high": "1", "low": "1", "close": "1"},\n {"idx": 2}]',
        ":2: open: missing",
    ),
    (
        "auto",
        '[{"idx": "soon", "open": "1", "high": "1", "low": "1", "close": "1"}]',
        ":1: idx: must be an integer (open time), got 'soon'",
    ),
    (
        "auto",
        '[{"idx": 1, "open": "1", "high": "1", "low": "1", "close": "1"}]\n[{"idx": 2, "open": }]',
        ":2: json: Expecting value",
    ),
    ("auto", '{"code": "0", "data": []}', ":1: answer: neither a /klines array"),
    ("klines-json", "[]", ":1: rows: no candles in the file"),
    ("klines-json", "[[1, 2]]", ":1: bar: a bar is an object"),
    ("csv", "time,price\n", ":1: rows: no trades in the file"),
]


@pytest.mark.parametrize(("fmt", "text", "expected"), BAD_FILES)
def test_a_bad_file_is_refused_naming_the_file_line_and_field(
    tmp_path: Path, fmt: str, text: str, expected: str
) -> None:
    bad = tmp_path / "history.txt"
    bad.write_text(text)
    with pytest.raises(ReplayError) as caught:
        load_history(bad, fmt)
    assert str(caught.value).startswith(f"{bad}:") and expected in str(caught.value)


def test_a_zip_of_one_file_is_read_as_that_file_and_a_zip_of_two_refused(tmp_path: Path) -> None:
    one, two = tmp_path / "one.zip", tmp_path / "two.zip"
    with zipfile.ZipFile(one, "w") as z:
        z.writestr("BTCUSDT-aggTrades-2025-01-01.csv", AGG + "\n")
    assert load_history(one).format == "binance-aggtrades"
    with zipfile.ZipFile(two, "w") as z:
        z.writestr("a.csv", AGG)
        z.writestr("b.csv", AGG)
    with pytest.raises(
        ReplayError, match=r"two.zip:1: file: a .zip must hold one file, it holds 2"
    ):
        load_history(two)


def test_the_configuration_names_the_bad_file_or_the_bad_format_key(tmp_path: Path) -> None:
    (tmp_path / "k.csv").write_text(KLINE + "\n" + KLINE.replace(",1.5,", ",9,", 1) + "\n")
    with pytest.raises(ConfigError) as caught:
        replay_settings("k.csv", tmp_path, 500)
    assert str(caught.value) == (
        f"{tmp_path / 'k.csv'}:2: high: high/low do not contain open/close"
    )
    with pytest.raises(ConfigError) as caught:
        replay_settings("k.csv", tmp_path, 500, fmt="binance")
    assert "simulation.market[0].replay_format: must be one of auto, csv, binance-klines," in str(
        caught.value
    )
    # A format named that the file is not: refused, not misread.
    with pytest.raises(ConfigError, match=r"k.csv:1: columns: 12 columns, a binance-aggtrades"):
        replay_settings("k.csv", tmp_path, 500, fmt="binance-aggtrades")


def test_one_history_under_simulation_path_is_read_once_for_every_market(tmp_path: Path) -> None:
    extra = f'\n[simulation.path]\nmodel = "replay"\nreplay = "builtin:{samples.KLINES}"\n'
    extra += '\n[[simulation.market]]\nsymbol = "ETHUSDT"\nprice = "2000"\n'
    sim = with_histories(parse_config(BASE + extra, str(tmp_path / "tradehall.toml")).simulation)
    assert sim.path.history is not None
    assert sim.overrides["ETHUSDT"].history is sim.path.history


def test_the_configuration_reads_a_files_first_lines_what_runs_the_simulation_all(
    tmp_path: Path,
) -> None:
    """A day of trades takes seconds to read: only serve and engine (the simulation) pay it;
    any other command checks the first 50 lines."""
    rows = [AGG.replace(",1735689600000,", f",{T0 + i * 1000},") for i in range(80)]
    rows[69] = rows[69].replace("95000.1", "95000.x")
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    extra = '\n[[simulation.market]]\nsymbol = "BTCUSDT"\nmodel = "replay"\nreplay = "t.csv"\n'
    (tmp_path / "tradehall.toml").write_text(BASE + extra)
    cfg = load_config(tmp_path / "tradehall.toml")
    assert cfg.simulation.overrides[SYMBOL].replay_format == "auto"
    with pytest.raises(ReplayError, match=r"t.csv:70: price: '95000.x' is not a number"):
        with_histories(cfg.simulation)
