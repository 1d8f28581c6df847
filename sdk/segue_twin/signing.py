"""Signatures the twin puts on reasoning so it can check replays the way the vendors do.

Anthropic thinking signature: base64 of ``{"m": model, "h": HMAC(secret, model + canonical prefix + text)}``.
The prefix is what the block was produced under (tools, system, earlier messages) with cache_control and
None values removed, so moving breakpoints never invalidates a block, but any other change does.

OpenAI ``encrypted_content``: ``base64url(payload JSON) + "." + base64url(HMAC)``; the payload carries the
model, the item id, the summary and the raw reasoning text. It is signed, not encrypted: the twin only needs
to tell its own untouched items from anything else.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any, Literal

from segue._core.hashing import canonical_json
from segue_twin._wire import strip_for_binding

SignatureCheck = Literal["ok", "model_binding_mismatch", "prefix_binding_mismatch"]


def _mac(secret: bytes, data: str) -> str:
    return hmac.new(secret, data.encode("utf-8"), hashlib.sha256).hexdigest()


def prefix_digests(tools: Any, system: Any, messages: Sequence[Any]) -> list[str]:
    """Digest of the prefix before each message: element i covers tools, system and ``messages[:i]``.

    Chained, so checking every thinking block of a long conversation stays linear in its length.
    """
    digest = hashlib.sha256(canonical_json(strip_for_binding({"tools": tools, "system": system})).encode("utf-8"))
    out = [digest.hexdigest()]
    for message in messages:
        digest.update(canonical_json(strip_for_binding(message)).encode("utf-8"))
        out.append(digest.copy().hexdigest())
    return out


def _binding_text(model: str, prefix_digest: str, text: str) -> str:
    return canonical_json({"model": model, "prefix": prefix_digest, "thinking": text})


def sign_thinking(secret: bytes, *, model: str, prefix_digest: str, text: str) -> str:
    """The signature of a thinking block with ``text`` produced by ``model`` under a prefix (see prefix_digests)."""
    envelope = {"m": model, "h": _mac(secret, _binding_text(model, prefix_digest, text))}
    return base64.b64encode(canonical_json(envelope).encode("utf-8")).decode("ascii")


def check_thinking(secret: bytes, signature: object, *, model: str, prefix_digest: str, text: str) -> SignatureCheck:
    """Whether a replayed block verifies for this request: ok, wrong model, or wrong prefix/tampered."""
    if not isinstance(signature, str):
        return "prefix_binding_mismatch"
    try:
        envelope = json.loads(base64.b64decode(signature.encode("ascii"), validate=True))
    except (ValueError, UnicodeEncodeError, binascii.Error):
        return "prefix_binding_mismatch"
    if not isinstance(envelope, dict) or not isinstance(envelope.get("m"), str):
        return "prefix_binding_mismatch"
    if envelope["m"] != model:
        return "model_binding_mismatch"
    expected = _mac(secret, _binding_text(model, prefix_digest, text))
    return "ok" if hmac.compare_digest(expected, str(envelope.get("h", ""))) else "prefix_binding_mismatch"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(secret: bytes, payload: dict[str, Any]) -> str:
    """Signed, URL-safe token carrying ``payload`` (used for OpenAI ``encrypted_content``)."""
    body = canonical_json(payload).encode("utf-8")
    tag = hmac.new(secret, body, hashlib.sha256).digest()
    return f"{_b64url(body)}.{_b64url(tag)}"


def unseal(secret: bytes, token: object) -> dict[str, Any] | None:
    """The payload of a token made by `seal` with the same secret, or None if it does not verify."""
    if not isinstance(token, str) or token.count(".") != 1:
        return None
    body_text, tag_text = token.split(".")
    try:
        body, tag = _unb64url(body_text), _unb64url(tag_text)
    except (ValueError, binascii.Error):
        return None
    if not hmac.compare_digest(hmac.new(secret, body, hashlib.sha256).digest(), tag):
        return None
    payload = json.loads(body)
    return payload if isinstance(payload, dict) else None
