"""The pages and their files as HTTP answers: shipped in the package, served with a strict
Content-Security-Policy, nothing inline that the policy would block, the operator page and the
admin API refused off loopback unless configured."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path, PurePosixPath

import pytest
from starlette.testclient import TestClient

from support import ADMIN_TOKEN, make_exchange
from tradehall.api.app import create_app
from tradehall.config import ConfigError, load_config
from tradehall.web import vendor

STATIC = resources.files("tradehall.web") / "static"
PAGES = ("index.html", "admin.html")
OUTSIDER = ("203.0.113.7", 40000)


@pytest.fixture
def exchange_path(tmp_path: Path) -> Path:
    return tmp_path / "tradehall.db"


def client_for(db: Path, *, admin_remote: bool = False, client: tuple[str, int]) -> TestClient:
    app = create_app(
        make_exchange(db), admin_token=ADMIN_TOKEN, run_scheduler=False, admin_remote=admin_remote
    )
    return TestClient(app, client=client)


@pytest.fixture
def local(exchange_path: Path) -> Iterator[TestClient]:
    with client_for(exchange_path, client=("127.0.0.1", 40000)) as http:
        yield http


def referenced_files(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/web/[^"]+)"', html)


@pytest.mark.parametrize("page", PAGES)
def test_pages_hold_nothing_inline(page: str) -> None:
    html = (STATIC / page).read_text()
    scripts = re.findall(r"<script\b[^>]*>", html)
    assert scripts and all(' src="/web/' in tag for tag in scripts)
    assert html.count("<script ") == html.count("></script>")  # no inline script body
    assert re.search(r"<style\b", html) is None
    assert re.search(r"\sstyle=", html) is None
    assert re.search(r"\son[a-z]+=", html) is None  # no inline event handler
    assert "localStorage" not in html


def test_scripts_keep_no_secret_in_storage() -> None:
    scripts = (STATIC / "js").iterdir()
    text = "\n".join(s.read_text() for s in scripts)
    assert "localStorage" not in text and "sessionStorage" not in text
    assert "innerHTML" not in text  # everything is built from text nodes


def test_pages_and_every_file_they_load_are_served_with_the_policy(local: TestClient) -> None:
    for path, page in (("/", "index.html"), ("/admin", "admin.html")):
        answer = local.get(path)
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/html; charset=utf-8"
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy
        assert "default-src 'none'" in policy and "unsafe" not in policy
        assert answer.text == (STATIC / page).read_text()
        for file in referenced_files(answer.text):
            served = local.get(file)
            assert served.status_code == 200, file
            assert served.headers["x-content-type-options"] == "nosniff"
    assert local.get("/web/js/trader.js").headers["content-type"].startswith("text/javascript")
    assert local.get("/web/style.css").headers["content-type"].startswith("text/css")


def test_the_vendored_chart_library_ships_with_its_license_and_notice(local: TestClient) -> None:
    library = local.get("/web/vendor/lightweight-charts.standalone.production.js")
    assert library.status_code == 200
    assert "TradingView Lightweight Charts" in library.text[:300]
    assert "Apache License 2.0" in library.text[:300]
    notice = local.get("/web/vendor/lightweight-charts.NOTICE").text
    assert "TradingView, Inc." in notice and "https://www.tradingview.com/" in notice
    assert "Apache License" in local.get("/web/vendor/lightweight-charts.LICENSE").text
    # The page carries the attribution and the link the license asks for.
    index = local.get("/").text
    assert 'href="https://www.tradingview.com/"' in index
    assert "/web/vendor/lightweight-charts.NOTICE" in index


def test_unknown_files_are_json_404s_and_nothing_outside_static_is_served(
    local: TestClient,
) -> None:
    for path in ("/web/nope.js", "/web/../pages.py", "/web/js/../../pages.py", "/web/", "/adminx"):
        answer = local.get(path)
        assert answer.status_code == 404, path
        assert answer.json()["code"] == -1020


def test_operator_page_and_admin_api_refused_off_loopback(exchange_path: Path) -> None:
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with client_for(exchange_path, client=OUTSIDER) as outsider:
        page = outsider.get("/admin")
        assert page.status_code == 403
        assert "admin_remote = true" in page.text
        assert "script" not in page.text
        assert "content-security-policy" in page.headers
        api = outsider.get("/admin/v1/status", headers=auth)
        assert (api.status_code, api.json()["code"]) == (403, -2015)
        assert outsider.get("/").status_code == 200  # the trader view is for everyone


def test_admin_remote_opens_page_and_api_but_the_token_is_still_required(
    exchange_path: Path,
) -> None:
    with client_for(exchange_path, admin_remote=True, client=OUTSIDER) as outsider:
        assert outsider.get("/admin").status_code == 200
        assert outsider.get("/admin/v1/status").status_code == 401
        wrong = outsider.get("/admin/v1/status", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        assert outsider.get("/admin/v1/status", headers=auth).json()["writable"] is True


def test_admin_remote_is_read_from_the_server_table(tmp_path: Path) -> None:
    assert load_config().server.admin_remote is False
    default = (resources.files("tradehall") / "default_config.toml").read_text()
    assert "admin_remote = false" in default  # documented in the template
    config = tmp_path / "web.toml"
    config.write_text(default.replace("admin_remote = false", "admin_remote = true"))
    assert load_config(config).server.admin_remote is True
    config.write_text(default.replace("admin_remote = false", 'admin_remote = "yes"'))
    with pytest.raises(ConfigError, match="admin_remote"):
        load_config(config)


def test_every_shipped_file_is_declared_package_data() -> None:
    """``pip install`` (a wheel, not this checkout) carries exactly what the globs in
    pyproject.toml name: each file under static/ must match one."""
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    globs = project["tool"]["setuptools"]["package-data"]["tradehall.web"]
    root = Path(str(STATIC)).parent
    files = [p.relative_to(root).as_posix() for p in Path(str(STATIC)).rglob("*") if p.is_file()]
    assert len(files) >= 10
    for file in files:
        assert any(PurePosixPath(file).match(glob) for glob in globs), file


def test_the_vendored_files_are_those_the_pin_names() -> None:
    vendored = STATIC / "vendor"
    header = (vendored / vendor.BUILD).read_text()[:200]
    assert f"TradingView Lightweight Charts™ v{vendor.VERSION}\n" in header
    assert (vendored / "lightweight-charts.NOTICE").read_text() == vendor.NOTICE
