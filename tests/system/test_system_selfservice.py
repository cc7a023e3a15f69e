"""Self-service accounts with real processes, as a stranger meets them: `tradehall engine`
behind `tradehall gateway`, both given the configuration with ``[sandbox] self_service =
true``: the gateway serves the endpoints and the page's button, applies the creation limits
itself, and the engine makes the account; the account trades and uses its faucet."""

from __future__ import annotations

import signal
import uuid
from importlib import resources
from pathlib import Path

import pytest

from support import nats_unreachable, start_engine, start_gateway
from tradehall.client import ApiError, Client

pytestmark = pytest.mark.skipif(bool(nats_unreachable()), reason=str(nats_unreachable()))


def test_behind_a_gateway(tmp_path: Path) -> None:
    builtin = resources.files("tradehall").joinpath("default_config.toml").read_text("utf-8")
    config = tmp_path / "sandbox.toml"
    extra = "[sandbox]\nself_service = true\n\n[limits]\nself_service_per_ip = [2, 3600]\n"
    config.write_text(builtin + "\n" + extra)
    subject = f"test-{uuid.uuid4().hex}"
    engine = start_engine(tmp_path / "data", subject, "--config", str(config))
    gateway = None
    try:
        gateway = start_gateway(subject, "--config", str(config), rate_limits=True)
        with Client(gateway.url) as public:
            created = public.sandbox_create_account()
            public.sandbox_create_account()
            with pytest.raises(ApiError) as refused:  # the gateway's limit: 2 per address
                public.sandbox_create_account()
            assert (refused.value.status, refused.value.code) == (429, -1003)
            assert "from this address" in refused.value.msg
            page = public.request("GET", "/", signed=False)
            assert b'data-self-service="on"' in page.content
        with Client(gateway.url, created["apiKey"], created["secret"]) as trader:
            trader.futures_transfer("USDT", "250", "spot", "futures")
            topped = trader.sandbox_faucet()
            assert topped["deposited"] == {"spot": {"USDT": "250.00000000"}, "futures": {}}
            order = trader.create_order("BTCUSDT", "BUY", "LIMIT", volume="0.1", price="100")
            assert trader.sandbox_reset()["cancelledOrders"] == 1
            assert trader.get_order("BTCUSDT", order["orderId"])["status"] == "CANCELED"
    finally:
        if gateway is not None:
            gateway.stop(signal.SIGTERM)
        engine.stop(signal.SIGTERM)
