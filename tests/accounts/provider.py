"""A real OpenID Connect provider for the sign-in tests: the npm `oidc-provider` (certified)
in its own node process, reached through a plain HTTP front in this process.

The front forwards every request as it is. A test can make it play an attacker on the way
(`swap_client`): the browser's authorization request and Parley's code exchange are made in
another client's name, so the provider itself issues a genuine, signed ID token for Parley's
nonce whose audience is that other client.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from config.embedded_redis import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "node" / "oidc_provider.mjs"
CLIENT_ID, CLIENT_SECRET = "parley", "parley-client-secret"
INTRUDER_ID, INTRUDER_SECRET = "intruder", "intruder-client-secret"
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Provider:
    """One provider process and its front; `issuer` is the front's URL."""

    def __init__(self, *, parley_url: str, folder: Path, code_ttl: int = 60) -> None:
        self.parley_url = parley_url
        self.accounts_file = folder / "accounts.json"
        self.accounts: dict[str, dict] = {}
        self.swap_client = False
        # The provider's redirects back to Parley, as they pass the front; with `hold`, the
        # browser is not sent on (an attacker keeping an unused code); with `delay`, it is sent
        # on that many seconds late.
        self.callbacks: list[str] = []
        self.hold = False
        self.delay = 0.0
        self.back_port = free_port()
        self.front = ThreadingHTTPServer(("127.0.0.1", 0), _front_handler(self))
        self.issuer = f"http://127.0.0.1:{self.front.server_address[1]}"
        self._save()
        callback = f"{parley_url}/login/provider/callback/"
        clients = [
            {"client_id": client_id, "client_secret": secret, "redirect_uris": [callback],
             "post_logout_redirect_uris": [f"{parley_url}/login/"]}
            for client_id, secret in ((CLIENT_ID, CLIENT_SECRET), (INTRUDER_ID, INTRUDER_SECRET))
        ]  # fmt: skip
        env = {**os.environ, "OP_ISSUER": self.issuer, "OP_PORT": str(self.back_port),
               "OP_ACCOUNTS": str(self.accounts_file), "OP_CLIENTS": json.dumps(clients),
               "OP_CODE_TTL": str(code_ttl)}  # fmt: skip
        if not (ROOT / "tests" / "node" / "node_modules" / "oidc-provider").exists():
            raise RuntimeError("oidc-provider is missing: `make node` installs it (make test does)")
        self.process = subprocess.Popen(
            ["node", str(SCRIPT)], env=env, stdout=subprocess.PIPE, text=True,
            stderr=(folder / "provider.log").open("w"),
        )  # fmt: skip
        line = self.process.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError(f"the OpenID provider did not start: {line!r}")
        threading.Thread(target=self.front.serve_forever, daemon=True).start()

    def add_account(self, login: str, **claims) -> None:
        """An account at the provider (claims: email, email_verified, groups, disabled, ...)."""
        self.accounts[login] = {"email_verified": True, **claims}
        self._save()

    def _save(self) -> None:
        aside = self.accounts_file.with_suffix(".tmp")
        aside.write_text(json.dumps(self.accounts))
        aside.replace(self.accounts_file)

    def stop(self) -> None:
        self.front.shutdown()
        self.front.server_close()
        self.process.terminate()
        self.process.wait(10)

    # --- what the front does to a request on its way (only with swap_client) ---------------

    def rewrite(self, method: str, path: str, body: bytes) -> tuple[str, bytes]:
        if not self.swap_client:
            return path, body
        parsed = urllib.parse.urlsplit(path)
        if parsed.path == "/auth":
            query = dict(urllib.parse.parse_qsl(parsed.query))
            query["client_id"] = INTRUDER_ID
            return f"/auth?{urllib.parse.urlencode(query)}", body
        if parsed.path == "/token" and method == "POST":
            form = dict(urllib.parse.parse_qsl(body.decode()))
            form.update(client_id=INTRUDER_ID, client_secret=INTRUDER_SECRET)
            return path, urllib.parse.urlencode(form).encode()
        return path, body


def _front_handler(provider: Provider):
    class Front(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path, body = provider.rewrite(self.command, self.path, body)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
            headers["Host"] = f"127.0.0.1:{provider.front.server_address[1]}"
            if body:
                headers["Content-Length"] = str(len(body))
            upstream = http.client.HTTPConnection("127.0.0.1", provider.back_port, timeout=30)
            try:
                upstream.request(self.command, path, body=body or None, headers=headers)
                answer = upstream.getresponse()
                content = answer.read()
                location = answer.getheader("Location") or ""
                if location.startswith(f"{provider.parley_url}/login/provider/callback/"):
                    provider.callbacks.append(location)
                    if provider.hold:
                        self.send_response(204)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    time.sleep(provider.delay)
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in HOP_HEADERS:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)
            finally:
                upstream.close()

        do_GET = do_POST = _forward

    return Front
