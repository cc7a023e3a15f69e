"""WebSocket streams: the family's market-data protocol (spot and futures) and the private
order, balance and position streams (see docs/websocket.md)."""
