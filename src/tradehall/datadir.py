"""The data folder: database, admin token, the running server's address, and the lock that
keeps two processes from owning the same store."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tradehall.secretbox import ENV_VAR, SecretBox


class DataDirBusy(Exception):
    """Another process (a running server, or another offline command) owns the folder."""


class DataDir:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @property
    def db_path(self) -> Path:
        return self.path / "tradehall.db"

    @property
    def journal_path(self) -> Path:
        """The journal's own SQLite file (the projections stay in ``db_path``)."""
        return self.path / "journal.db"

    @property
    def token_path(self) -> Path:
        return self.path / "admin.token"

    @property
    def server_path(self) -> Path:
        return self.path / "server.json"

    def ensure(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)

    def admin_token(self) -> str:
        """The admin API token, created on first use, readable by the owner only (0600)."""
        self.ensure()
        try:
            fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return self.token_path.read_text().strip()
        token = secrets.token_hex(32)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return token

    @property
    def secret_key_path(self) -> Path:
        return self.path / "secret.key"

    def existing_secret_box(self) -> SecretBox | None:
        """The sealing key if there is one yet (TRADEHALL_SECRET_KEY, else secret.key)."""
        from_env = os.environ.get(ENV_VAR)
        if from_env:
            return SecretBox.from_text(from_env)
        try:
            return SecretBox.from_text(self.secret_key_path.read_text())
        except FileNotFoundError:
            return None

    def secret_box(self) -> SecretBox:
        """The key that seals API secrets in the store: from TRADEHALL_SECRET_KEY when set,
        else the data folder's secret.key (created on first use, mode 0600)."""
        from_env = os.environ.get(ENV_VAR)
        if from_env:
            return SecretBox.from_text(from_env)
        self.ensure()
        try:
            fd = os.open(self.secret_key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return SecretBox.from_text(self.secret_key_path.read_text())
        with os.fdopen(fd, "w") as f:
            f.write(SecretBox.encode_key(SecretBox.new_key()) + "\n")
        return SecretBox.from_text(self.secret_key_path.read_text())

    def read_token(self) -> str | None:
        try:
            return self.token_path.read_text().strip() or None
        except OSError:
            return None

    @contextlib.contextmanager
    def lock(self, name: str = "lock", holder: str = "another tradehall process") -> Iterator[None]:
        """Hold the folder (``name``: the server's and offline commands' lock, or
        ``projector.lock``, the one projector's) while the block runs."""
        self.ensure()
        fd = os.open(self.path / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise DataDirBusy(f"{self.path} is in use by {holder}") from None
            yield
        finally:
            os.close(fd)

    def write_server(self, host: str, port: int, store: dict[str, str] | None = None) -> None:
        """Where the running server answers, and which store it uses (``store_identity``)."""
        tmp = self.server_path.with_suffix(".tmp")
        info: dict[str, Any] = {"host": host, "port": port, "pid": os.getpid()}
        if store is not None:
            info["store"] = store
        tmp.write_text(json.dumps(info))
        tmp.replace(self.server_path)

    def read_server(self) -> dict[str, Any] | None:
        try:
            info = json.loads(self.server_path.read_text())
        except (OSError, ValueError):
            return None
        return info if isinstance(info, dict) else None

    def clear_server(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.server_path.unlink()
