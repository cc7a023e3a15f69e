"""Prometheus metrics (``GET /metrics``, docs/operations.md).

The hot paths only add to plain counters where the event already happens (a dict entry, a
histogram bucket); everything else (open orders, book depth, open interest, balances,
connections) is read at scrape time by the collectors here, which hand the library's
exposition what they found."""
