"""The web interface served by the exchange itself (trader view and operator view)."""
