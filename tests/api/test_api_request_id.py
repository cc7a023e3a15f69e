"""Every answer carries an X-Request-Id: the client's own when usable, else one made by the
server, on fast-path answers, catalogue errors, unknown paths and the probes alike."""

from __future__ import annotations

from support import Env

PING = "/spot/open/sapi/v1/ping"


def test_the_clients_id_comes_back(env: Env) -> None:
    for path in (PING, "/spot/open/sapi/v1/account", "/nope", "/readyz"):
        answer = env.http.get(path, headers={"X-Request-Id": "client:1.a_b-C"})
        assert answer.headers["x-request-id"] == "client:1.a_b-C", path


def test_an_id_is_made_when_none_or_an_unusable_one_is_sent(env: Env) -> None:
    made = {env.http.get(PING).headers["x-request-id"] for _ in range(3)}
    assert len(made) == 3
    for unusable in (b"has space", b"x" * 65, "\u00fcn\u00ef".encode(), b"a\x00b"):
        answer = env.http.get(PING, headers={b"X-Request-Id": unusable})
        assert answer.headers["x-request-id"].encode() not in (unusable, b"")
    refused = env.http.post("/spot/open/sapi/v1/order", content=b"{}")
    assert refused.status_code == 400 and refused.headers["x-request-id"]
