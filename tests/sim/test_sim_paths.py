"""Reference paths (seeded GBM, CSV replay) and the [simulation] configuration's errors: one
line naming the file, the line and the field."""

from __future__ import annotations

import math
import random
import statistics
from array import array
from pathlib import Path

import pytest

from tradehall.config import ConfigError, load_config, parse_config
from tradehall.sim.paths import (
    CROSS_BASIS_HALF_LIFE_S,
    CommonFactor,
    CrossPath,
    GbmPath,
    ReplayPath,
)
from tradehall.sim.replay import ReplayError, load_history, with_histories
from tradehall.sim.settings import History, PathSettings

BASE = (
    Path(__file__).resolve().parents[2] / "src" / "tradehall" / "default_config.toml"
).read_text()


def test_gbm_is_reproducible_from_its_seed_and_follows_its_drift() -> None:
    def walk(seed: str, settings: PathSettings) -> list[float]:
        path = GbmPath(settings, 100.0, random.Random(seed))
        return [path.step(60.0) for _ in range(1000)]

    calm = PathSettings(volatility=0.5)
    assert walk("a", calm) == walk("a", calm)
    assert walk("a", calm) != walk("b", calm)
    flat = walk("a", PathSettings(volatility=0.0))
    assert flat[-1] == pytest.approx(100.0)
    up = walk("a", PathSettings(volatility=0.0, drift=100.0))
    assert up[-1] > 100.0
    jumpy = walk("a", PathSettings(volatility=0.0, jump_rate=60.0, jump_size=0.05))
    assert len(set(jumpy)) > 10  # only jumps move it


def history(times: list[int], prices: list[float], end: int) -> History:
    return History(array("q", times), array("d", prices), 0, end, "trades", "csv", len(times))


def steps(h: History) -> list[tuple[int, float]]:
    return list(zip(h.times, h.prices, strict=True))


def test_replay_plays_the_history_at_its_speed_and_loops_going_on_from_its_end() -> None:
    path = ReplayPath(history([0, 1_000, 2_000], [10.0, 11.0, 9.0], 2_000), speed=2.0, start=10.0)
    assert path.step(0.5) == pytest.approx(11.0)  # 1 s of history in 0.5 s
    path.step(0.25)
    assert path.price == pytest.approx(11.0) and path.view()["historyTime"] == 1_500
    # The end: round 2 starts from where round 1 ended (9), the history scaled by 9/10.
    assert path.step(0.25) == pytest.approx(9.0) and path.view()["round"] == 2
    assert path.step(0.5) == pytest.approx(9.0 * 11.0 / 10.0)
    scaled = ReplayPath(history([0, 1_000], [10.0, 11.0], 1_000), speed=1.0, start=100.0)
    assert scaled.step(1.0) == pytest.approx(110.0)  # a market that had traded at 100


def test_candles_and_trades_files(tmp_path: Path) -> None:
    candles = tmp_path / "c.csv"
    candles.write_text(
        "Time,Open,High,Low,Close,Volume\n0,10,12,9,11,1\n60,11,11.5,10,10.5,1\n180,10.5,11,10,10.5,1\n"
    )
    h = load_history(candles)
    # Closing up: open, low, high, close; closing down: open, high, low, close; a quarter each.
    assert steps(h)[:8] == [
        (0, 10.0),
        (15_000, 9.0),
        (30_000, 12.0),
        (45_000, 11.0),
        (75_000, 11.5),
        (90_000, 10.0),
        (105_000, 10.5),
        (195_000, 10.0),  # after the gap (120..180 s) the close held; flat: nearer extreme first
    ]
    assert (h.kind, h.format, h.rows, h.start_ms, h.end_ms) == ("candles", "csv", 3, 0, 240_000)
    trades = tmp_path / "t.csv"
    trades.write_text(
        "price,time,qty\n5,2024-01-01T00:00:00+00:00,1\n6,2024-01-01T00:00:01,1\n6,1704067202,1\n"
    )
    h = load_history(trades)
    assert steps(h) == [(0, 5.0), (1_000, 6.0)] and h.end_ms == 2_000 and h.rows == 3
    assert h.start_ms == 1_704_067_200_000  # ISO without an offset is UTC


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("time,open,high,close\n1,2,3,4\n", ":1: low: missing column"),
        ("time,price\n1,2\nx,3\n", ":3: time: 'x' is neither"),
        ("time,price\n1,2\n2,-3\n", ":3: price: must be a positive number"),
        ("time,price\n5,2\n2,3\n", ":3: time: rows must be in time order"),
        ("time,price\n1,2\n2\n", ":3: price: missing value"),
        ("time,open,high,low,close\n1,10,9,8,10\n", ":2: high: high/low do not contain"),
    ],
)
def test_a_bad_replay_file_is_named_with_line_and_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    with pytest.raises(ReplayError) as caught:
        load_history(bad)
    assert str(caught.value).startswith(str(bad)) and expected in str(caught.value)


def config_error(extra: str, tmp_path: Path) -> str:
    source = tmp_path / "tradehall.toml"
    source.write_text(BASE + extra)
    with pytest.raises(ConfigError) as caught:
        load_config(source)
    message = str(caught.value)
    assert "\n" not in message
    return message


def line_of(text: str, needle: str, tmp_path: Path) -> int:
    return (BASE + text).splitlines().index(needle) + 1


def test_bad_simulation_settings_name_file_line_and_field(tmp_path: Path) -> None:
    extra = "\n[simulation.path]\nvolatility = -0.5\n"
    line = line_of(extra, "volatility = -0.5", tmp_path)
    assert config_error(extra, tmp_path) == (
        f"{tmp_path / 'tradehall.toml'}:{line}: simulation.path.volatility:"
        " must be between 0 and 10, got -0.5"
    )
    extra = '\n[simulation]\nmarkets = ["BTCUSDT", "DOGEUSDT"]\n'
    message = config_error(extra, tmp_path)
    line = line_of(extra, 'markets = ["BTCUSDT", "DOGEUSDT"]', tmp_path)
    assert f":{line}: " in message
    assert "simulation.markets: unknown market 'DOGEUSDT'" in message
    extra = '\n[[simulation.market]]\nsymbol = "E-DOGE-USDT"\n'
    assert "simulation.market[0].symbol: unknown market 'E-DOGE-USDT'" in config_error(
        extra, tmp_path
    )
    extra = "\n[simulation]\nhistory_days = 5000\n"
    assert "simulation.history_days: must be between 0 and 3650, got 5000" in config_error(
        extra, tmp_path
    )
    for extra, expected in {
        '\n[simulation.taker]\nsize_model = "lognormal"\n': (
            "simulation.taker.size_model: must be 'pareto' or 'uniform', got 'lognormal'"
        ),
        "\n[simulation.taker]\nmin_size = 2\n": (
            "simulation.taker.min_size: applies to size_model = 'uniform'"
        ),
        '\n[simulation.taker]\nsize_model = "uniform"\nmedian_usd = 10\n': (
            "simulation.taker.median_usd: applies to size_model = 'pareto'"
        ),
        "\n[simulation.taker]\nmax_usd = 100\n": (
            "simulation.taker.max_usd: must be above median_usd (150)"
        ),
        "\n[simulation.taker]\nmax_usd = 1000000000\n": (
            "simulation.taker.max_usd: must be at most 10000000, got 1000000000"
        ),
        "\n[simulation.taker]\ntail = 0.1\n": "simulation.taker.tail: must be between 0.5 and 5",
    }.items():
        assert expected in config_error(extra, tmp_path)
    extra = "\n[simulation.maker]\nlevelz = 3\n"
    assert "simulation.maker.levelz: unknown key (did you mean 'levels'?)" in config_error(
        extra, tmp_path
    )
    extra = '\n[[simulation.faults.rule]]\npath = "order"\n'
    assert "simulation.faults.rule[0].path: must be '*' or start with '/'" in config_error(
        extra, tmp_path
    )


def test_a_replay_csv_missing_a_column_stops_the_configuration(tmp_path: Path) -> None:
    (tmp_path / "history.csv").write_text("time,open,high,close\n1,2,3,4\n")
    extra = (
        '\n[[simulation.market]]\nsymbol = "BTCUSDT"\nmodel = "replay"\nreplay = "history.csv"\n'
    )
    assert config_error(extra, tmp_path) == (
        f"{tmp_path / 'history.csv'}:1: low: missing column (a candles file needs time, open,"
        " high, low, close)"
    )


def test_the_shipped_sample_replays() -> None:
    extra = (
        '\n[[simulation.market]]\nsymbol = "BTCUSDT"\nmodel = "replay"\n'
        'replay = "builtin:btcusdt-1m.csv"\nspeed = 10\n'
    )
    cfg = parse_config(BASE + extra, "x.toml")
    market = with_histories(cfg.simulation).overrides["BTCUSDT"]
    assert market.model == "replay" and market.speed == 10
    assert market.history is not None and market.history.rows == 240


def test_speed_runs_a_random_walk_faster_as_far_as_it_goes() -> None:
    slow = GbmPath(PathSettings(volatility=0.0, drift=1.0), 100.0, random.Random(1))
    fast = GbmPath(PathSettings(volatility=0.0, drift=1.0, speed=10.0), 100.0, random.Random(1))
    for _ in range(10):
        slow.step(1.0)
    fast.step(1.0)
    assert fast.price == pytest.approx(slow.price)


def test_a_cross_path_is_the_ratio_of_its_legs_and_its_basis_decays() -> None:
    btc = GbmPath(PathSettings(volatility=2.0), 40_000.0, random.Random("btc"))
    eth = GbmPath(PathSettings(volatility=2.0), 2_000.0, random.Random("eth"))
    fresh = CrossPath(eth, btc, 0.05, speed=1.0)
    restarted = CrossPath(eth, btc, 0.05 * 1.02, speed=1.0)  # its last trade 2 % rich
    for _ in range(600):
        btc.step(1.0)
        eth.step(1.0)
        assert fresh.step(1.0) == pytest.approx(eth.price / btc.price, rel=1e-12)
        restarted.step(1.0)
    # After one half-life the 2 % gap is 1 %, whichever way the legs went.
    assert CROSS_BASIS_HALF_LIFE_S == 600
    assert restarted.price / (eth.price / btc.price) == pytest.approx(1.01, rel=1e-9)


@pytest.mark.parametrize("correlation", [0.0, 0.7, 0.95])
def test_walks_sharing_a_factor_move_with_the_configured_correlation(correlation: float) -> None:
    factor = CommonFactor(random.Random("common"))
    settings = PathSettings(volatility=0.8, correlation=correlation)
    btc = GbmPath(settings, 30_000.0, random.Random("btc"), factor)
    eth = GbmPath(settings, 2_000.0, random.Random("eth"), factor)
    moves: list[tuple[float, float]] = []
    for _ in range(20_000):
        b0, e0 = btc.price, eth.price
        moves.append((math.log(btc.step(1.0) / b0), math.log(eth.step(1.0) / e0)))
    xs, ys = zip(*moves, strict=True)
    assert statistics.correlation(xs, ys) == pytest.approx(correlation, abs=0.03)
