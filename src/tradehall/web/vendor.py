"""Vendor the chart library: ``python -m tradehall.web.vendor`` (needs ``npm``).

Fetches the pinned ``lightweight-charts`` package with ``npm pack`` from the npm registry,
checks the tarball against the pinned integrity, and writes its standalone production build,
its LICENSE and the NOTICE its license asks to show into ``static/vendor/``. Run it after
changing VERSION and INTEGRITY (``npm view lightweight-charts@<version> dist.integrity``)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import tarfile
import tempfile
from pathlib import Path

VERSION = "5.2.1"
INTEGRITY = (
    "sha512-"
    "IVwoK1RLFiLPubaKIjNbtjWLnpPMqiABSrTay6whmNa8L1+19292VtHJ+BWyPUuLCwF0tcQlhEWd1CLB2a1nsQ=="
)
BUILD = "lightweight-charts.standalone.production.js"
NOTICE = (
    "TradingView Lightweight Charts\n"
    "Copyright (\u0441) 2023 TradingView, Inc. https://www.tradingview.com/\n"
)
"""The NOTICE file of the library's repository, byte for byte (its "(c)" is a Cyrillic letter);
the npm package does not carry it."""
TARGET = Path(__file__).parent / "static" / "vendor"


def integrity_of(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def vendor(target: Path = TARGET) -> list[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            ["npm", "pack", f"lightweight-charts@{VERSION}", "--silent"],
            cwd=tmp,
            check=True,
            capture_output=True,
        )
        tarball = Path(tmp) / f"lightweight-charts-{VERSION}.tgz"
        found = integrity_of(tarball.read_bytes())
        if found != INTEGRITY:
            raise SystemExit(f"{tarball.name}: integrity {found}, expected {INTEGRITY}")
        with tarfile.open(tarball) as archive:
            build = archive.extractfile(f"package/dist/{BUILD}")
            license_file = archive.extractfile("package/LICENSE")
            assert build is not None and license_file is not None
            files = {
                BUILD: build.read(),
                "lightweight-charts.LICENSE": license_file.read(),
                "lightweight-charts.NOTICE": NOTICE.encode(),
            }
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in files.items():
        (target / name).write_bytes(data)
        written.append(target / name)
    return written


if __name__ == "__main__":
    for path in vendor():
        print(path)
