"""`tradehall serve --demo` as a real process, replaying a shipped sample in data.binance.vision's
klines layout: `sim status` says where in the file it is, the reference is the file's price
there, and the /klines answers trade around the file's prices."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli_support import tradehall_inline
from support import ServerProcess
from tradehall.client import Client

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = "binance-klines-btcusdt-1m.csv"


def sim_status(data: Path, *extra: str) -> str:
    """`tradehall sim status` through the running server, in this process (cli_support)."""
    done = tradehall_inline("sim", "status", "--data-dir", str(data), *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def file_price(at_ms: int) -> tuple[float, float, float]:
    """(the file's price at ``at_ms``, its lowest and highest price up to then), read here
    from the CSV: each candle walked open, the extreme its close leaves behind, the other,
    close, a quarter of its minute each."""
    steps: list[tuple[int, float]] = []
    with (ROOT / "src/tradehall/sim/data" / SAMPLE).open() as f:
        for row in csv.reader(f):
            open_ms = int(row[0]) // 1000
            o, h, low, c = (float(v) for v in row[1:5])
            walk = (o, low, h, c) if c > o or (c == o and o - low <= h - o) else (o, h, low, c)
            steps.extend((open_ms + 15_000 * k, p) for k, p in enumerate(walk))
    seen = [p for ms, p in steps if ms <= at_ms]
    return seen[-1], min(seen), max(seen)


def test_serve_demo_replays_a_binance_klines_file(
    server_factory: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    config = tmp_path / "replay.toml"
    config.write_text(
        (ROOT / "src/tradehall/default_config.toml").read_text()
        + f'\n[[simulation.market]]\nsymbol = "BTCUSDT"\nmodel = "replay"\n'
        f'replay = "builtin:{SAMPLE}"\n'
    )
    data = tmp_path / "data"
    server = server_factory(data, "--demo", "--config", str(config))
    client = Client(server.url)
    deadline = time.monotonic() + 30
    while not client.klines("BTCUSDT", "1min", 5):
        assert time.monotonic() < deadline, "no trade on BTCUSDT"
        time.sleep(0.2)
    bars = client.klines("BTCUSDT", "1min", 5)  # before the status: no later trade in them
    status: dict[str, Any] = json.loads(sim_status(data, "--json"))
    market = status["markets"][0]
    replay = market["replay"]
    assert (market["symbol"], market["model"]) == ("BTCUSDT", "replay")
    assert (replay["file"], replay["format"], replay["round"]) == (
        f"builtin:{SAMPLE}",
        "binance-klines",
        1,
    )
    price, low, high = file_price(replay["historyTime"])
    assert float(market["reference"]) == price  # the file's own prices on a fresh market
    # The exchange's trades are the makers' quotes around the reference: within the takers'
    # reach (well under 50 bps) of the file's prices so far, not the demo's 30,000.
    for bar in bars:
        assert low * 0.995 <= float(bar["low"]) <= float(bar["high"]) <= high * 1.005, bar
    assert f"(builtin:{SAMPLE} at 2025-01-01T00:0" in sim_status(data)
