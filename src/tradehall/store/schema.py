"""Versioned schema migrations, in SQL that SQLite and PostgreSQL both accept.

A migration is applied once, in order, inside a transaction; ``schema_version`` records the
highest applied. Never edit a released migration: add the next one. A step is a statement
for every backend, or ``Only(dialect, ...)``: statements for one backend's dialect, which the
others skip (a migration may then do nothing on some backend but still records its version).
"""

from __future__ import annotations

from dataclasses import dataclass

SQLITE = "sqlite"
POSTGRESQL = "postgresql"


@dataclass(frozen=True, slots=True)
class Only:
    """Migration statements for one dialect (``SQLITE`` or ``POSTGRESQL``) only."""

    dialect: str
    statements: tuple[str, ...]


Step = str | Only


def _rebuild_sqlite(table: str, create: str, columns: str, indexes: tuple[str, ...]) -> Only:
    """SQLite's way to change a table's definition: create the new one under a temporary
    name, copy every row, drop the old table (and with it its indexes), rename the new one
    into place and create the indexes again."""
    return Only(
        SQLITE,
        (
            create,
            f"INSERT INTO {table}_new ({columns}) SELECT {columns} FROM {table}",
            f"DROP TABLE {table}",
            f"ALTER TABLE {table}_new RENAME TO {table}",
            *indexes,
        ),
    )


MIGRATIONS: list[tuple[int, str, list[Step]]] = [
    (
        1,
        "spot foundation",
        [
            """CREATE TABLE users (
                id BIGINT PRIMARY KEY,
                name TEXT NOT NULL,
                created BIGINT NOT NULL
            )""",
            """CREATE TABLE api_keys (
                api_key TEXT PRIMARY KEY,
                secret TEXT NOT NULL,
                user_id BIGINT NOT NULL,
                read_only INTEGER NOT NULL,
                ips TEXT NOT NULL,
                created BIGINT NOT NULL,
                revoked BIGINT
            )""",
            """CREATE TABLE balances (
                account BIGINT NOT NULL,
                asset TEXT NOT NULL,
                free BIGINT NOT NULL,
                locked BIGINT NOT NULL,
                PRIMARY KEY (account, asset)
            )""",
            """CREATE TABLE ledger (
                id BIGINT PRIMARY KEY,
                account BIGINT NOT NULL,
                asset TEXT NOT NULL,
                d_free BIGINT NOT NULL,
                d_locked BIGINT NOT NULL,
                reason TEXT NOT NULL,
                ref BIGINT NOT NULL,
                time BIGINT NOT NULL
            )""",
            "CREATE INDEX ledger_account ON ledger (account, asset)",
            """CREATE TABLE orders (
                id BIGINT PRIMARY KEY,
                account BIGINT NOT NULL,
                symbol TEXT NOT NULL,
                side TEXT NOT NULL,
                type TEXT NOT NULL,
                tif TEXT NOT NULL,
                price BIGINT NOT NULL,
                qty BIGINT NOT NULL,
                quote_qty BIGINT NOT NULL,
                filled BIGINT NOT NULL,
                filled_quote BIGINT NOT NULL,
                held BIGINT NOT NULL,
                status TEXT NOT NULL,
                client_id TEXT NOT NULL,
                time BIGINT NOT NULL,
                updated BIGINT NOT NULL
            )""",
            "CREATE INDEX orders_account ON orders (account, symbol, id)",
            "CREATE INDEX orders_open ON orders (status, id)",
            """CREATE TABLE trades (
                id BIGINT PRIMARY KEY,
                symbol TEXT NOT NULL,
                price BIGINT NOT NULL,
                qty BIGINT NOT NULL,
                quote BIGINT NOT NULL,
                time BIGINT NOT NULL,
                taker_side TEXT NOT NULL,
                bid_order BIGINT NOT NULL,
                ask_order BIGINT NOT NULL,
                bid_account BIGINT NOT NULL,
                ask_account BIGINT NOT NULL,
                bid_fee BIGINT NOT NULL,
                ask_fee BIGINT NOT NULL
            )""",
            "CREATE INDEX trades_bid ON trades (bid_account, symbol, id)",
            "CREATE INDEX trades_ask ON trades (ask_account, symbol, id)",
            "CREATE INDEX trades_symbol ON trades (symbol, id)",
            """CREATE TABLE transfers (
                id BIGINT PRIMARY KEY,
                tx_id TEXT NOT NULL UNIQUE,
                account BIGINT NOT NULL,
                asset TEXT NOT NULL,
                amount BIGINT NOT NULL,
                time BIGINT NOT NULL
            )""",
            """CREATE TABLE klines (
                symbol TEXT NOT NULL,
                interval TEXT NOT NULL,
                open_time BIGINT NOT NULL,
                open BIGINT NOT NULL,
                high BIGINT NOT NULL,
                low BIGINT NOT NULL,
                close BIGINT NOT NULL,
                volume BIGINT NOT NULL,
                PRIMARY KEY (symbol, interval, open_time)
            )""",
        ],
    ),
    (
        2,
        "isolated margin",
        [
            """CREATE TABLE margin_accounts (
                id BIGINT PRIMARY KEY,
                user_id BIGINT NOT NULL,
                symbol TEXT NOT NULL
            )""",
            """CREATE TABLE margin_debts (
                account BIGINT NOT NULL,
                asset TEXT NOT NULL,
                principal BIGINT NOT NULL,
                interest BIGINT NOT NULL,
                PRIMARY KEY (account, asset)
            )""",
            """CREATE TABLE engine_state (
                name TEXT PRIMARY KEY,
                value BIGINT NOT NULL
            )""",
        ],
    ),
    (
        3,
        "perpetual futures",
        [
            # One JSON document per futures record (order, position, trigger, setting,
            # contract state, funding record), upserted under its key; ``live`` marks what
            # recovery loads. History reads use the primary key's (kind, user_id) prefix.
            """CREATE TABLE futures_docs (
                kind TEXT NOT NULL,
                user_id BIGINT NOT NULL,
                contract TEXT NOT NULL,
                id BIGINT NOT NULL,
                live INTEGER NOT NULL,
                doc TEXT NOT NULL,
                PRIMARY KEY (kind, user_id, contract, id)
            )""",
            "CREATE INDEX futures_live ON futures_docs (live, kind)",
        ],
    ),
    (
        4,
        "cheaper writes of the busiest tables",
        [
            # The audit's GROUP BY (account, asset) over the whole ledger was this index's
            # only reader, and it is faster without it: a scan in table order and a sort
            # (SQLite) or a hash (PostgreSQL), not a lookup into the table per entry. Every
            # commit paid for it: six entries per placement, scattered over the accounts.
            "DROP INDEX ledger_account",
            # In SQLite only ``INTEGER PRIMARY KEY`` makes the key the table's rowid: with
            # ``BIGINT PRIMARY KEY`` each of these tables was a rowid b-tree plus a separate
            # index on id, so every row written updated two b-trees. Same columns, same
            # values (a rowid is a signed 64-bit integer, like BIGINT). PostgreSQL has no
            # such distinction: nothing to do there.
            _rebuild_sqlite(
                "ledger",
                """CREATE TABLE ledger_new (
                    id INTEGER PRIMARY KEY,
                    account BIGINT NOT NULL,
                    asset TEXT NOT NULL,
                    d_free BIGINT NOT NULL,
                    d_locked BIGINT NOT NULL,
                    reason TEXT NOT NULL,
                    ref BIGINT NOT NULL,
                    time BIGINT NOT NULL
                )""",
                "id, account, asset, d_free, d_locked, reason, ref, time",
                (),
            ),
            _rebuild_sqlite(
                "orders",
                """CREATE TABLE orders_new (
                    id INTEGER PRIMARY KEY,
                    account BIGINT NOT NULL,
                    symbol TEXT NOT NULL,
                    side TEXT NOT NULL,
                    type TEXT NOT NULL,
                    tif TEXT NOT NULL,
                    price BIGINT NOT NULL,
                    qty BIGINT NOT NULL,
                    quote_qty BIGINT NOT NULL,
                    filled BIGINT NOT NULL,
                    filled_quote BIGINT NOT NULL,
                    held BIGINT NOT NULL,
                    status TEXT NOT NULL,
                    client_id TEXT NOT NULL,
                    time BIGINT NOT NULL,
                    updated BIGINT NOT NULL
                )""",
                "id, account, symbol, side, type, tif, price, qty, quote_qty, filled,"
                " filled_quote, held, status, client_id, time, updated",
                (
                    "CREATE INDEX orders_account ON orders (account, symbol, id)",
                    "CREATE INDEX orders_open ON orders (status, id)",
                ),
            ),
            _rebuild_sqlite(
                "trades",
                """CREATE TABLE trades_new (
                    id INTEGER PRIMARY KEY,
                    symbol TEXT NOT NULL,
                    price BIGINT NOT NULL,
                    qty BIGINT NOT NULL,
                    quote BIGINT NOT NULL,
                    time BIGINT NOT NULL,
                    taker_side TEXT NOT NULL,
                    bid_order BIGINT NOT NULL,
                    ask_order BIGINT NOT NULL,
                    bid_account BIGINT NOT NULL,
                    ask_account BIGINT NOT NULL,
                    bid_fee BIGINT NOT NULL,
                    ask_fee BIGINT NOT NULL
                )""",
                "id, symbol, price, qty, quote, time, taker_side, bid_order, ask_order,"
                " bid_account, ask_account, bid_fee, ask_fee",
                (
                    "CREATE INDEX trades_bid ON trades (bid_account, symbol, id)",
                    "CREATE INDEX trades_ask ON trades (ask_account, symbol, id)",
                    "CREATE INDEX trades_symbol ON trades (symbol, id)",
                ),
            ),
        ],
    ),
    (
        5,
        "the traded value of each bar (klines' amount, for the streams and tickers)",
        [
            # Bars written before this version carry 0: their value is not known (the trades
            # they summed may be gone) and is not made up.
            "ALTER TABLE klines ADD COLUMN amount BIGINT NOT NULL DEFAULT 0",
        ],
    ),
    (
        6,
        "open orders indexed alone (closed orders never enter the index)",
        [
            # Recovery is the index's one reader, and it wants the open orders only. On
            # (status, id) every order ever placed had an entry, and each order that ended
            # moved its entry (a delete and an insert); a partial index holds the open
            # orders alone: an order that ends leaves it, one filled on arrival never enters.
            # Measured (tests/store/measure_open_index.py): 12-19 % less CPU per order row.
            # The text must match OPEN_ORDERS' WHERE term exactly (SQLite's rule for using a
            # partial index).
            "DROP INDEX orders_open",
            "CREATE INDEX orders_open ON orders (id) WHERE status IN ('NEW', 'PARTIALLY_FILLED')",
        ],
    ),
    (
        7,
        "retention: ledger checkpoints, ended futures orders indexed for pruning",
        [
            # Per (account, asset), the sums of every ledger entry pruned so far (and how many,
            # up to which id): a balance is its checkpoint plus its remaining entries, so the
            # audit stays exact however much detail is pruned.
            """CREATE TABLE ledger_checkpoints (
                account BIGINT NOT NULL,
                asset TEXT NOT NULL,
                free BIGINT NOT NULL,
                locked BIGINT NOT NULL,
                entries BIGINT NOT NULL,
                through BIGINT NOT NULL,
                PRIMARY KEY (account, asset)
            )""",
            # The pruner walks the ended futures orders and conditional orders in id order
            # (their ids follow time); without this it would sort all of them per batch. The
            # text must match the pruner's WHERE term exactly (SQLite's partial-index rule).
            "CREATE INDEX futures_ended ON futures_docs (id)"
            " WHERE live = 0 AND kind IN ('order', 'trigger')",
        ],
    ),
    (
        8,
        "the admin audit trail: every admin action, who, when, what and the result",
        [
            """CREATE TABLE admin_log (
                id BIGINT PRIMARY KEY,
                time BIGINT NOT NULL,
                actor TEXT NOT NULL,
                agent TEXT NOT NULL,
                action TEXT NOT NULL,
                params TEXT NOT NULL,
                result TEXT NOT NULL,
                code BIGINT NOT NULL,
                detail TEXT NOT NULL
            )""",
            # Append-only: the store itself refuses to change or remove a row (the audit
            # checks that the ids run 1..n, so a row removed by other means shows).
            Only(
                SQLITE,
                (
                    "CREATE TRIGGER admin_log_no_update BEFORE UPDATE ON admin_log"
                    " BEGIN SELECT RAISE(ABORT, 'admin_log is append-only'); END",
                    "CREATE TRIGGER admin_log_no_delete BEFORE DELETE ON admin_log"
                    " BEGIN SELECT RAISE(ABORT, 'admin_log is append-only'); END",
                ),
            ),
            Only(
                POSTGRESQL,
                (
                    """CREATE OR REPLACE FUNCTION admin_log_append_only() RETURNS trigger
                    LANGUAGE plpgsql AS $$
                    BEGIN RAISE EXCEPTION 'admin_log is append-only'; END $$""",
                    "CREATE TRIGGER admin_log_append_only BEFORE UPDATE OR DELETE ON admin_log"
                    " FOR EACH ROW EXECUTE FUNCTION admin_log_append_only()",
                    "CREATE TRIGGER admin_log_no_truncate BEFORE TRUNCATE ON admin_log"
                    " FOR EACH STATEMENT EXECUTE FUNCTION admin_log_append_only()",
                ),
            ),
        ],
    ),
]

LATEST_VERSION = MIGRATIONS[-1][0]
ADMIN_LOG_VERSION = next(v for v, what, _ in MIGRATIONS if what.startswith("the admin audit trail"))
"""The migration that creates ``admin_log`` (8)."""


@dataclass(frozen=True, slots=True)
class Table:
    """A table as the latest migration leaves it: its columns in order and its primary key."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]

    @property
    def column_list(self) -> str:
        return ", ".join(self.columns)


TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table("users", ("id", "name", "created"), ("id",)),
        Table(
            "api_keys",
            ("api_key", "secret", "user_id", "read_only", "ips", "created", "revoked"),
            ("api_key",),
        ),
        Table("balances", ("account", "asset", "free", "locked"), ("account", "asset")),
        Table(
            "ledger",
            ("id", "account", "asset", "d_free", "d_locked", "reason", "ref", "time"),
            ("id",),
        ),
        Table(
            "ledger_checkpoints",
            ("account", "asset", "free", "locked", "entries", "through"),
            ("account", "asset"),
        ),
        Table(
            "orders",
            (
                "id",
                "account",
                "symbol",
                "side",
                "type",
                "tif",
                "price",
                "qty",
                "quote_qty",
                "filled",
                "filled_quote",
                "held",
                "status",
                "client_id",
                "time",
                "updated",
            ),
            ("id",),
        ),
        Table(
            "trades",
            (
                "id",
                "symbol",
                "price",
                "qty",
                "quote",
                "time",
                "taker_side",
                "bid_order",
                "ask_order",
                "bid_account",
                "ask_account",
                "bid_fee",
                "ask_fee",
            ),
            ("id",),
        ),
        Table("transfers", ("id", "tx_id", "account", "asset", "amount", "time"), ("id",)),
        Table(
            "klines",
            ("symbol", "interval", "open_time", "open", "high", "low", "close", "volume", "amount"),
            ("symbol", "interval", "open_time"),
        ),
        Table("margin_accounts", ("id", "user_id", "symbol"), ("id",)),
        Table("margin_debts", ("account", "asset", "principal", "interest"), ("account", "asset")),
        Table("engine_state", ("name", "value"), ("name",)),
        Table(
            "admin_log",
            ("id", "time", "actor", "agent", "action", "params", "result", "code", "detail"),
            ("id",),
        ),
        Table(
            "futures_docs",
            ("kind", "user_id", "contract", "id", "live", "doc"),
            ("kind", "user_id", "contract", "id"),
        ),
    )
}
"""Every table holding state (all but ``schema_version``), in export order. A migration that
adds or changes a table updates this catalogue; a test checks it against both backends."""
