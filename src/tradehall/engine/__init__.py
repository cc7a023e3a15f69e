"""The pure exchange engine: commands in, events out; no I/O, no clock."""
