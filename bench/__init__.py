"""tradehall's benchmark harness: engine, wire to wire (with the floor), recovery and memory.

Run ``python -m bench`` from the repository root (``--quick`` for a small run, ``--help`` for
the options). Results go to ``bench/results/<timestamp>/``. See docs/performance.md.
"""
