"""tradehall: a self-hostable crypto exchange speaking the ChainUp-style open REST API."""

__version__ = "0.1.0"
