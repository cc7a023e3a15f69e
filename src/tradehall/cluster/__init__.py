"""Scale-out topology: one engine process and stateless gateway processes, over NATS
(docs/deployment.md). The defaults live here, light to import (the CLI reads them)."""

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
DEFAULT_SUBJECT = "tradehall"
"""Subject prefix of an exchange's messages (several exchanges can share one NATS)."""
DEFAULT_TIMEOUT = 2.0
"""Seconds a gateway waits for the engine's answer (twice, the second time resending the
same command id) before it answers 503 / -1001."""
HISTORY_WAIT_S = 1.5
"""Seconds a history read waits in the engine process for the projector to reach the writes
before it (then 503 / -1001, "history is catching up"; ``serve`` waits
``store.journaled.WAIT_S``). Under a gateway's ``DEFAULT_TIMEOUT``: the engine answers a
message once all its commands are done, so a longer wait would make the gateway give up on
the read ("the engine is not reachable") and on every command sent with it, a write already
applied among them."""
DEFAULT_BATCH_MAX = 128
"""Commands a gateway worker sends the engine in one message at most."""
DEFAULT_BATCH_DELAY = 0.0
"""Seconds a busy gateway worker (messages in flight) holds a command for others to join its
message; what was admitted in one event-loop turn goes together in any case, and an idle
worker sends at the end of the turn. 0: an interleaved A/B found no gain in 0.5 ms
(docs/deployment.md)."""
DEFAULT_READ_CACHE_MS = 500
"""Milliseconds a gateway answers a public read again from the engine's last answer, at most
(and only while no commit touched what it shows: ``cluster.read_cache``)."""


class LinkError(Exception):
    """NATS is not reachable."""
