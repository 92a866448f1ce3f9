"""A scripted identity provider: an RSA key made in the test, its JWKS served on loopback.

It signs whatever claims a test asks for — valid ones, expired ones, the wrong audience
or issuer — so the exchange is tested against a real key set fetched over HTTP by the
same PyJWT client production uses, not a stub of it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

JWKS_PATH = "/.well-known/jwks.json"


class ScriptedIdentityProvider:
    """Mints RS256 tokens with its own key; `jwks_url` is where Keel fetches the key set."""

    def __init__(self, issuer: str, *, kid: str = "test-key-1") -> None:
        self.issuer = issuer
        self.kid = kid
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.jwks_url = ""
        self.fetches = 0

    def jwks(self) -> dict[str, Any]:
        jwk = RSAAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def token(self, audience: str, *, ttl_s: int = 300, **claims: Any) -> str:
        """A token from this provider; `ttl_s` below zero makes one already expired."""
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.issuer,
            "aud": audience,
            "iat": now - 5,
            "exp": now + ttl_s,
            **claims,
        }
        return jwt.encode(body, self._key, algorithm="RS256", headers={"kid": self.kid})

    @contextmanager
    def serving(self) -> Iterator[ScriptedIdentityProvider]:
        """Serve the JWKS on a free loopback port for the block."""
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != JWKS_PATH:
                    self.send_error(404)
                    return
                provider.fetches += 1
                body = json.dumps(provider.jwks()).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.jwks_url = f"http://127.0.0.1:{server.server_address[1]}{JWKS_PATH}"
        thread = threading.Thread(target=server.serve_forever, name="scripted-idp", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
