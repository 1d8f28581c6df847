"""Who may use `segue serve --http`: bearer tokens, and the tenants each may act for.

Tokens come from the config file's `http.tokens` (each names the environment variable holding it, or holds its
SHA-256, so the file never holds a token) and from $SEGUE_SERVE_TOKEN (one token that may act for any tenant,
for a server that one app uses). A request proves a token with `Authorization: Bearer <token>`; the server keeps
only SHA-256 digests and compares them in constant time.

stdio needs none of this: the process that starts `segue serve --stdio` is the app itself.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping

import attrs

from segue.generated.serve import HttpConfig

TOKEN_ENV = "SEGUE_SERVE_TOKEN"
ANY_TENANT = "*"
DEFAULT_TENANT = "default"


class TenantNotAllowed(Exception):
    """The request names a tenant its token may not act for."""

    def __init__(self, principal: str, tenant: str, allowed: frozenset[str]) -> None:
        shown = ", ".join(sorted(allowed))
        super().__init__(f"the token {principal!r} may act for tenants {shown}, not {tenant!r}")
        self.tenant = tenant


class TokenConfigError(ValueError):
    """A token of the config cannot be used; `.pointer` is relative to `http/tokens`."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer


@attrs.frozen(kw_only=True)
class Principal:
    """Who sent a request: a token's name and the tenants it may act for (None: any tenant)."""

    name: str
    tenants: frozenset[str] | None

    def tenant_for(self, requested: str | None) -> str:
        """The tenant a request acts for: the one it names, which the token must allow; when it names none, the
        token's only tenant, or "default"."""
        if requested is None:
            only = next(iter(self.tenants)) if self.tenants is not None and len(self.tenants) == 1 else None
            requested = only or DEFAULT_TENANT
        if self.tenants is not None and requested not in self.tenants:
            raise TenantNotAllowed(self.name, requested, self.tenants)
        return requested


class Tokens:
    """The tokens a server accepts."""

    def __init__(self, entries: list[tuple[bytes, Principal]]) -> None:
        self._entries = entries

    @classmethod
    def load(cls, config: HttpConfig | None, env: Mapping[str, str] = os.environ) -> Tokens | None:
        """The config's tokens plus $SEGUE_SERVE_TOKEN; None when there are none (the server then takes requests
        without a token, which it allows only on loopback)."""
        entries: list[tuple[bytes, Principal]] = []
        for i, token in enumerate((config.tokens if config else None) or []):
            pointer = f"/{i}"
            if (token.token_env is None) == (token.token_sha256 is None):
                raise TokenConfigError(pointer, f"token {token.name!r} needs exactly one of token_env, token_sha256")
            if token.token_env is not None:
                secret = env.get(token.token_env, "")
                if not secret:
                    raise TokenConfigError(
                        f"{pointer}/token_env", f"the environment variable {token.token_env} is not set (or empty)"
                    )
                digest = _digest(secret)
            else:
                assert token.token_sha256 is not None
                digest = bytes.fromhex(token.token_sha256)
            tenants = None if ANY_TENANT in token.tenants else frozenset(token.tenants)
            if any(p.name == token.name for _, p in entries):
                raise TokenConfigError(f"{pointer}/name", f"token name {token.name!r} is used twice")
            if any(hmac.compare_digest(d, digest) for d, _ in entries):
                raise TokenConfigError(pointer, f"token {token.name!r} is the same token as an earlier one")
            entries.append((digest, Principal(name=token.name, tenants=tenants)))
        if env.get(TOKEN_ENV):
            entries.append((_digest(env[TOKEN_ENV]), Principal(name=TOKEN_ENV, tenants=None)))
        return cls(entries) if entries else None

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal of an `Authorization: Bearer <token>` header, or None."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = _digest(token.strip())
        found = None
        for known, principal in self._entries:  # every entry, so the time taken does not tell which matched
            if hmac.compare_digest(known, digest):
                found = principal
        return found


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()
