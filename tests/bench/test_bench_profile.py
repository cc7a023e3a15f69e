"""The harness's profiling pass profiles placements: its server takes them (no rate limit
refuses them) and the profile of its event loop shows the placement endpoint at work."""

from __future__ import annotations

import pstats
from pathlib import Path

from bench.common import cpu_plan
from bench.wire import WireSpec, profile_server


def test_the_profile_pass_profiles_accepted_placements(tmp_path: Path) -> None:
    spec = WireSpec(
        accounts=4,
        closed_connections=8,
        warmup=0.2,
        duration=0.8,
        seed_levels=20,
        seed_per_level=1,
        info_scenarios=(),
    )
    summary = profile_server(spec, cpu_plan(), tmp_path)
    statuses = summary["place_closed_loop_statuses"]
    assert set(statuses) == {"200"} and statuses["200"] > 0, statuses
    assert "warning" not in summary
    assert summary["place_closed_loop_rps_under_profiler"] > 0
    # The endpoint ran under the profiler (read from the whole profile: in a run this short,
    # the server's start-up imports can fill the summary's top rows on a fresh checkout).
    stats = pstats.Stats(str(tmp_path / "server.prof")).stats  # type: ignore[attr-defined]
    calls = {name: value[1] for (_, _, name), value in stats.items()}
    assert calls.get("create_order", 0) >= statuses["200"], sorted(calls)[:20]
    assert summary["top_cumtime"] and summary["top_tottime"]
    assert (tmp_path / "server_profile.txt").read_text().strip()
