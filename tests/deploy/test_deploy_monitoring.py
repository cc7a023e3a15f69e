"""deploy/: the Grafana dashboard and the Prometheus rules import as they are, and every
metric a panel or a rule names exists in the /metrics of live processes (`tradehall engine`
and a `tradehall gateway` worker: together they serve every family). The rules pass
`promtool check rules` when promtool is installed (Debian: the prometheus package);
otherwise a YAML and expression-shape check runs and the promtool test says it skipped."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from support import (
    Backend,
    ServerProcess,
    nats_unreachable,
    postgres_unreachable,
    start_engine,
    start_gateway,
    start_ha_pair,
)
from tradehall.client import AdminClient
from tradehall.datadir import DataDir

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "tradehall-dashboard.json"
RULES = DEPLOY / "prometheus" / "alerts.yml"
SCRAPE_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
METRIC = re.compile(r"\btradehall_[a-z0-9_]+\b")


def dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def named(exprs: list[str]) -> set[str]:
    return {name for expr in exprs for name in METRIC.findall(expr)}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def scrape(url: str, token: str | None = None) -> set[str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.fixture
def live_names(tmp_path: Path) -> Iterator[set[str]]:
    reason = nats_unreachable()
    if reason:
        pytest.skip(reason)
    subject = f"test-{uuid.uuid4().hex}"
    processes: list[ServerProcess] = []
    try:
        engine = start_engine(tmp_path / "data", subject, "--demo")
        processes.append(engine)
        port = free_port()
        processes.append(start_gateway(subject, "--metrics-port", str(port)))
        token = DataDir(engine.data_dir).read_token()
        assert token is not None
        with AdminClient(engine.url, token) as admin:
            admin.audit()  # the audit's gauges exist once an audit ran
        yield scrape(engine.url + "/metrics", token) | scrape(f"http://127.0.0.1:{port}/metrics")
    finally:
        for process in processes:
            process.stop(signal.SIGKILL)


HA = "tradehall_ha_"
"""Metrics of an HA leader only (``engine --standby``): checked on one."""


def test_every_metric_the_dashboard_and_the_rules_name_exists(live_names: set[str]) -> None:
    wanted = named(dashboard_exprs()) | named([rule["expr"] for rule in rules()])
    assert len(wanted) > 30
    assert sorted(n for n in wanted - live_names if not n.startswith(HA)) == []


def test_the_high_availability_rules_name_what_an_ha_leader_serves(tmp_path: Path) -> None:
    for reason in (nats_unreachable(), postgres_unreachable()):
        if reason:
            pytest.skip(reason)
    wanted = {n for n in named([rule["expr"] for rule in rules()]) if n.startswith(HA)}
    assert len(wanted) >= 4
    backend = Backend("postgresql")
    engines: list[ServerProcess] = []
    try:
        subject = f"test-{uuid.uuid4().hex}"
        database = backend.database(tmp_path / "a")
        engines = start_ha_pair(tmp_path / "a", tmp_path / "b", subject, database)
        token = DataDir(engines[0].data_dir).read_token()
        assert token is not None
        assert time_for_a_report(engines[0], token), "the standby never reported"
        served = scrape(engines[0].url + "/metrics", token)
        assert sorted(wanted - served) == []
    finally:
        for engine in reversed(engines):
            engine.stop()
        backend.drop()


def time_for_a_report(leader: ServerProcess, token: str) -> bool:
    """The standby's first report (every second) reaches the leader's view: its lag then
    appears in the metrics."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if "tradehall_ha_standby_lag" in scrape(leader.url + "/metrics", token):
            return True
        time.sleep(0.3)
    return False


def test_the_dashboard_imports_as_it_is() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 36
    assert [i["type"] for i in dash["__inputs"]] == ["datasource"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        assert panel["type"] in ("row", "timeseries"), panel["title"]
        if panel["type"] == "timeseries":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"]
            assert {"h", "w", "x", "y"} <= set(panel["gridPos"])
    for expr in dashboard_exprs():
        assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}"), expr


def test_the_rules_have_the_shape_prometheus_loads() -> None:
    """What promtool checks first, in Python: groups of named rules, each an alert with an
    expression, a severity and a summary; balanced brackets; no label on a user or order id."""
    doc = yaml.safe_load(RULES.read_text())
    names = [group["name"] for group in doc["groups"]]
    assert len(names) == len(set(names))
    alerts = [rule["alert"] for rule in rules()]
    assert len(alerts) == len(set(alerts)) and len(alerts) >= 10
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert rule["annotations"]["summary"]
        expr = rule["expr"]
        for opening, closing in ("()", "{}", "[]"):
            assert expr.count(opening) == expr.count(closing), expr
        assert not re.search(r"user_id|order_id|api_key", expr)


def test_the_rules_and_the_scrape_config_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian: apt-get install prometheus): checked the"
                    " rules' YAML and expression shape only")  # fmt: skip
    checked = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    config = subprocess.run(
        [promtool, "check", "config", "--syntax-only", str(SCRAPE_CONFIG)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert config.returncode == 0, config.stdout + config.stderr
