"""API secrets encrypted at rest: AES-256-GCM with a key kept outside the database.

The server must know each secret in clear to verify HMAC signatures, so secrets are decrypted
into memory when the store is loaded; the database (and its backups and exports) only ever
holds sealed text. The API key is the associated data, so a sealed secret cannot be moved to
another key's row.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = "v1:"
ENV_VAR = "TRADEHALL_SECRET_KEY"
KEY_BYTES = 32
NONCE_BYTES = 12


class SecretKeyError(Exception):
    """The sealing key is malformed, or is not the one the stored secrets were sealed with."""


class SecretBox:
    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise SecretKeyError(f"the secret key must be {KEY_BYTES} bytes")
        self._aead = AESGCM(key)

    @staticmethod
    def new_key() -> bytes:
        return AESGCM.generate_key(bit_length=256)

    @staticmethod
    def encode_key(key: bytes) -> str:
        return base64.urlsafe_b64encode(key).decode()

    @classmethod
    def from_text(cls, text: str) -> SecretBox:
        try:
            key = base64.urlsafe_b64decode(text.strip().encode())
        except (binascii.Error, ValueError):
            raise SecretKeyError("the secret key is not valid base64") from None
        return cls(key)

    def seal(self, secret: str, api_key: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, secret.encode(), api_key.encode())
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, stored: str, api_key: str) -> str:
        if not stored.startswith(PREFIX):
            raise SecretKeyError("not a sealed secret")
        try:
            raw = base64.urlsafe_b64decode(stored[len(PREFIX) :].encode())
            plain = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], api_key.encode())
        except (InvalidTag, binascii.Error, ValueError):
            raise SecretKeyError(
                f"cannot decrypt the secret of API key {api_key[:6]}...: the secret key (the data"
                f" folder's secret.key, or {ENV_VAR}) is not the one it was sealed with"
            ) from None
        return plain.decode()

    @staticmethod
    def is_sealed(stored: str) -> bool:
        return stored.startswith(PREFIX)
