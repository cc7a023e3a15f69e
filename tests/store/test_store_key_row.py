"""KeyRow.with_secret: the row recovery and sealing build for every API key."""

from __future__ import annotations

import dataclasses

from tradehall.store.batch import KeyRow


def test_with_secret_changes_the_secret_and_keeps_every_other_field() -> None:
    row = KeyRow("key", "sealed", 7, True, ("10.0.0.0/8", "::1"), 1_700_000_000_000, 1_800)
    fields = [f.name for f in dataclasses.fields(KeyRow)]
    assert all(
        getattr(row, name) != getattr(KeyRow("", "", 0, False, (), 0), name) for name in fields
    )  # every field set apart from the defaults: a copy shows
    opened = row.with_secret("clear")
    assert opened == dataclasses.replace(row, secret="clear")
    assert row.secret == "sealed"  # the row itself is untouched
