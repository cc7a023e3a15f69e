"""The REST API: the family's spot endpoints (and later margin and futures) plus the admin API."""
