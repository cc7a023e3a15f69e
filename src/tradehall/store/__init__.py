"""Durable storage: one Store interface, the embedded SQLite implementation, group commit."""
