"""The collectors ``/metrics`` runs at each scrape. Counters come from plain counts kept on
the hot paths (``Monitor``, ``ExchangeStats``, ``GroupCommitter``, ``Fanout``); gauges are
read from live state here, at scrape time, never maintained per command.

A scrape may run on another thread than the event loop (a gateway worker's metrics
listener): every dict is copied whole first (one C-level operation under the GIL), so a
scrape never iterates a dict the loop is changing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tradehall.api.monitor import Monitor
from tradehall.engine.futures import INSURANCE_ACCOUNT
from tradehall.engine.futures_model import BY_ADL, BY_LIQUIDATION
from tradehall.engine.margin import POOL_ACCOUNT
from tradehall.engine.orders import BUY
from tradehall.exchange import Exchange
from tradehall.metrics.histogram import histogram_family
from tradehall.sim.faults import KINDS as FAULT_KINDS
from tradehall.store.journaled import JournaledStore
from tradehall.store.writer import GroupCommitter
from tradehall.stream.fanout import Fanout

AUTH_REASONS = ("missing_header", "api_key", "timestamp", "signature", "other")
RATE_LIMIT_REASONS = ("limit", "banned")


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class FrontCollector(Collector):
    """The front half (HTTP, signatures, limits) of ``serve`` or of a gateway worker."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    def collect(self) -> Iterator[Metric]:
        monitor = self.monitor
        requests = CounterMetricFamily(
            "tradehall_http_requests",
            "API requests answered, by endpoint (route path; 'unmatched' when no route serves"
            " it), method and HTTP status code.",
            labels=["endpoint", "method", "code"],
        )
        for (endpoint, method, status), n in monitor.answered().items():
            requests.add_metric([endpoint, method, str(status)], n)
        yield requests
        yield histogram_family(
            "tradehall_http_request_duration_seconds",
            "Time from a request's arrival to its answer, by endpoint and method.",
            ["endpoint", "method"],
            (
                ((endpoint, method), hist)
                for (endpoint, method), hist in dict(monitor.latency).items()
            ),
        )
        refusals = dict(monitor.refusals)
        limited = CounterMetricFamily(
            "tradehall_rate_limit_refusals",
            "Requests refused by the rate limits: 'limit' (429) or 'banned' (418, an IP banned"
            " after repeated refusals).",
            labels=["reason"],
        )
        for reason in RATE_LIMIT_REASONS:
            limited.add_metric([reason], refusals.get(("rate_limit", reason), 0))
        yield limited
        auth = CounterMetricFamily(
            "tradehall_auth_refusals",
            "Signed requests refused by authentication, by reason.",
            labels=["reason"],
        )
        for reason in AUTH_REASONS:
            auth.add_metric([reason], refusals.get(("auth", reason), 0))
        yield auth
        yield CounterMetricFamily(
            "tradehall_replay_refusals",
            "Signed requests refused as replays (a signature already used).",
            value=refusals.get(("replay", ""), 0),
        )
        yield CounterMetricFamily(
            "tradehall_http_errors",
            "Error answers (every status >= 400).",
            value=monitor.errors_total,
        )
        yield histogram_family(
            "tradehall_event_loop_lag_seconds",
            "How much later than asked the event loop ran a timer (sampled every second).",
            [],
            [((), monitor.loop_lag)],
        )


class ExchangeCollector(Collector):
    """The process that owns the exchange (``serve``, ``engine``): commands, commits, books,
    trades, futures and margin."""

    def __init__(self, exchange: Exchange, committer: GroupCommitter) -> None:
        self.exchange = exchange
        self.committer = committer

    def collect(self) -> Iterator[Metric]:
        ex = self.exchange
        stats = ex.stats
        yield from self._commands()
        committer = self.committer
        yield CounterMetricFamily(
            "tradehall_commits", "Group commits written to the store.", value=committer.commits
        )
        yield histogram_family(
            "tradehall_commit_batch_rows",
            "Rows written per group commit.",
            [],
            [((), committer.batch_rows)],
        )
        yield histogram_family(
            "tradehall_commit_duration_seconds",
            "Time from cutting a batch to its commit's end.",
            [],
            [((), committer.commit_seconds)],
        )
        yield histogram_family(
            "tradehall_commit_sync_seconds",
            "Time of each commit's COMMIT statement (the write-out and fsync).",
            [],
            [((), committer.sync_seconds)],
        )
        yield _gauge(
            "tradehall_store_writable",
            "1 while the store takes writes; 0 after a failed commit (fail-stop until restart).",
            1 if ex.failure is None else 0,
        )
        store = ex.store
        if isinstance(store, JournaledStore):
            yield _gauge("tradehall_journal_head", "The last journal record appended.", store.head)
            yield _gauge(
                "tradehall_journal_projected",
                "The last journal record the tables hold (the projector's position).",
                store.projected_seen(),
            )
            child = store.projector
            if child is not None:
                yield _gauge(
                    "tradehall_projector_up", "1 while the projector process runs.",
                    1 if child.alive() else 0,
                )  # fmt: skip
                yield CounterMetricFamily(
                    "tradehall_projector_restarts",
                    "Times the projector process exited and was started again.",
                    value=child.restarts,
                )
            if store.ha is not None:
                yield from _ha_metrics(store)
        yield from self._books(ex)
        markets = ex.config.markets
        trades = CounterMetricFamily(
            "tradehall_trades", "Trades executed, by market.", labels=["market"]
        )
        volume = CounterMetricFamily(
            "tradehall_traded_volume",
            "Quantity traded, by market: base asset (spot) or contracts (futures).",
            labels=["market"],
        )
        traded = dict(stats.traded)
        for symbol in [*markets.pairs, *markets.contracts]:
            count, qty = traded.get(symbol, (0, 0))
            pair = markets.pairs.get(symbol)
            trades.add_metric([symbol], count)
            volume.add_metric([symbol], qty / 10**pair.quantity_precision if pair else qty)
        yield trades
        yield volume
        yield from self._futures(ex)
        yield from self._insurance(ex)
        yield from self._margin(ex)
        if stats.audit is not None:
            when, ok, problems = stats.audit
            yield _gauge("tradehall_audit_ok", "1 if the last audit found no problem.", int(ok))
            yield _gauge("tradehall_audit_problems", "Problems the last audit found.", problems)
            yield _gauge(
                "tradehall_audit_last_run_timestamp_seconds",
                "When the last audit ran (UNIX time).",
                when / 1000,
            )

    def _commands(self) -> Iterator[Metric]:
        stats = self.exchange.stats
        family = CounterMetricFamily(
            "tradehall_engine_commands",
            "Engine commands by kind and outcome: applied, rejected (refused, nothing"
            " changed) or failed (an unexpected error: fail-stop).",
            labels=["kind", "outcome"],
        )
        rejected, failed = dict(stats.rejected), dict(stats.failed)
        for kind, total in dict(stats.commands).items():
            refused, broke = rejected.get(kind, 0), failed.get(kind, 0)
            family.add_metric([kind.__name__, "applied"], total - refused - broke)
            family.add_metric([kind.__name__, "rejected"], refused)
            family.add_metric([kind.__name__, "failed"], broke)
        yield family

    def _books(self, ex: Exchange) -> Iterator[Metric]:
        orders = GaugeMetricFamily(
            "tradehall_open_orders",
            "Orders resting on the book, by market and kind (spot, futures).",
            labels=["market", "kind"],
        )
        levels = GaugeMetricFamily(
            "tradehall_book_levels",
            "Price levels on the book, by market and side (bid, ask).",
            labels=["market", "side"],
        )
        engine = ex.engine
        for kind, books in (("spot", engine.spot.books), ("futures", engine.futures.books)):
            for symbol, book in list(books.items()):
                orders.add_metric([symbol, kind], len(book.orders))
                levels.add_metric([symbol, "bid"], len(book.bids.levels))
                levels.add_metric([symbol, "ask"], len(book.asks.levels))
        yield orders
        yield levels

    def _futures(self, ex: Exchange) -> Iterator[Metric]:
        fx = ex.engine.futures
        interest = GaugeMetricFamily(
            "tradehall_futures_open_interest_contracts",
            "Open interest (contracts held long, equal to those held short), by contract.",
            labels=["contract"],
        )
        for contract, positions in list(fx.by_contract.items()):
            held = sum(p.volume for p in list(positions.values()) if p.side == BUY)
            interest.add_metric([contract], held)
        yield interest
        forced = dict(ex.stats.forced)
        liquidations = CounterMetricFamily(
            "tradehall_futures_liquidations",
            "Liquidation orders the engine placed and closed, by contract.",
            labels=["contract"],
        )
        adl = CounterMetricFamily(
            "tradehall_futures_adl",
            "Auto-deleveraging closes (a counterparty's position closed against a"
            " liquidation the book could not absorb), by contract.",
            labels=["contract"],
        )
        for contract in ex.config.markets.contracts:
            liquidations.add_metric([contract], forced.get((contract, BY_LIQUIDATION), 0))
            adl.add_metric([contract], forced.get((contract, BY_ADL), 0))
        yield liquidations
        yield adl

    def _insurance(self, ex: Exchange) -> Iterator[Metric]:
        """Every asset the fund backs (futures margin coins, both assets of every margin
        pair: it pays the lending pool what a liquidated margin account could not) and any
        other it holds, so an alert on a low fund covers them all."""
        assets = ex.config.markets.assets
        backed = set(ex.engine.futures.margin_coins)
        backed.update(a for symbol in ex.config.markets.margin for a in _pair_assets(ex, symbol))
        backed.update(a for a in assets if ex.engine.ledger.free(INSURANCE_ACCOUNT, a))
        if not backed:
            return
        fund = GaugeMetricFamily(
            "tradehall_insurance_fund_balance",
            "The insurance fund's free balance, by asset (in the asset's units).",
            labels=["asset"],
        )
        for asset in sorted(backed):
            decimals = assets[asset].decimals if asset in assets else 0
            fund.add_metric([asset], ex.engine.ledger.free(INSURANCE_ACCOUNT, asset) / 10**decimals)
        yield fund

    def _margin(self, ex: Exchange) -> Iterator[Metric]:
        margin = ex.config.markets.margin
        if not margin:
            return
        lent: dict[str, int] = {}
        for account in list(ex.engine.margin.accounts.values()):
            for asset, (principal, _) in list(account.debts.items()):
                lent[asset] = lent.get(asset, 0) + principal
        assets = {a for symbol in margin for a in _pair_assets(ex, symbol)}
        family = GaugeMetricFamily(
            "tradehall_margin_pool_utilisation_ratio",
            "Share of the lending pool lent out (principal lent / (lent + free)), by asset.",
            labels=["asset"],
        )
        for asset in sorted(assets):
            out = lent.get(asset, 0)
            free = ex.engine.ledger.free(POOL_ACCOUNT, asset)
            family.add_metric([asset], out / (out + free) if out + free > 0 else 0.0)
        yield family
        done = dict(ex.stats.margin_liquidations)
        liquidations = CounterMetricFamily(
            "tradehall_margin_liquidations",
            "Margin accounts liquidated to the end (debts repaid, or the rest covered by the"
            " insurance fund or written off), by pair.",
            labels=["pair"],
        )
        waiting: dict[str, int] = dict.fromkeys(margin, 0)
        accounts = ex.engine.margin.accounts
        for account_id in list(ex.engine.margin.waiting):
            due = accounts.get(account_id)
            if due is not None:
                waiting[due.symbol] = waiting.get(due.symbol, 0) + 1
        stuck = GaugeMetricFamily(
            "tradehall_margin_liquidations_waiting",
            "Margin accounts at or below their liquidation level whose liquidation waits for"
            " liquidity on the book, by pair.",
            labels=["pair"],
        )
        for symbol in sorted(margin):
            liquidations.add_metric([symbol], done.get(symbol, 0))
            stuck.add_metric([symbol], waiting.get(symbol, 0))
        yield liquidations
        yield stuck


def _pair_assets(ex: Exchange, symbol: str) -> tuple[str, str]:
    pair = ex.config.markets.pairs[symbol]
    return pair.base, pair.quote


class FanoutCollector(Collector):
    """A process's WebSocket streams (the hub in ``serve``, a gateway worker's streams)."""

    def __init__(self, fanout: Fanout) -> None:
        self.fanout = fanout

    def collect(self) -> Iterator[Metric]:
        fanout = self.fanout
        yield _gauge(
            "tradehall_websocket_connections",
            "WebSocket connections open.",
            len(fanout.connections),
        )
        channels = sum(len(subs) for subs in list(fanout.channels.values()))
        private = sum(
            len(subs) for by_user in fanout.users.values() for subs in list(by_user.values())
        )
        yield _gauge(
            "tradehall_websocket_subscriptions",
            "Channel subscriptions plus private (account) streams open.",
            channels + private,
        )
        yield CounterMetricFamily(
            "tradehall_websocket_pushes",
            "Frames pushed to subscribers (each subscriber a push went to counts once).",
            value=fanout.pushes,
        )
        yield CounterMetricFamily(
            "tradehall_websocket_drops",
            "Connections the server closed (too slow, silent, revoked key).",
            value=fanout.drops,
        )


class SimulationCollector(Collector):
    """The market simulation and the fault injector, found when scraped (either may be
    attached after the app is built)."""

    def __init__(self, simulation: Callable[[], Any], faults: Callable[[], Any]) -> None:
        self.simulation = simulation
        self.faults = faults

    def collect(self) -> Iterator[Metric]:
        sim = self.simulation()
        running = bool(sim is not None and sim.running)
        yield _gauge("tradehall_simulation_running", "1 while the simulation runs.", running)
        yield _gauge(
            "tradehall_simulation_participants",
            "Simulated participants trading (0 when the simulation is stopped).",
            len(sim.participants()) if running else 0,
        )
        faults = self.faults()
        family = CounterMetricFamily(
            "tradehall_injected_faults",
            "Faults the fault injector injected, by kind.",
            labels=["kind"],
        )
        injected = faults.status()["injected"] if faults is not None else {}
        for kind in FAULT_KINDS:
            family.add_metric([kind], injected.get(kind, 0))
        yield family


def _ha_metrics(store: JournaledStore) -> Iterator[Metric]:
    """An HA leader's view (``engine --standby``): its epoch, the live standbys, their lag."""
    from tradehall.cluster.standby import ha_status

    view = ha_status(store.ha, store.head)
    yield _gauge("tradehall_ha_leader", "1 while this engine leads.", 1 if view["leading"] else 0)
    yield _gauge("tradehall_ha_epoch", "The epoch this engine leads in.", view["epoch"])
    yield _gauge("tradehall_ha_standbys", "Standby engines that reported lately.", view["standbys"])
    gone = [e for e in view["engines"] if e["role"] == "gone"]
    yield _gauge(
        "tradehall_ha_engines_gone",
        "Engines that reported in the last 15 minutes but not in the last 3 seconds.",
        len(gone),
    )
    lag = GaugeMetricFamily(
        "tradehall_ha_standby_lag",
        "Journal records a standby (or an engine gone silent) has still to replay.",
        labels=["node"],
    )
    for engine in view["engines"]:
        if engine["role"] in ("standby", "gone"):
            lag.add_metric([engine["node"]], engine["lag"])
    yield lag
