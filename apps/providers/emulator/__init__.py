"""A loopback emulator of the Anthropic, OpenAI and Gemini streaming APIs, for tests and benches.

The official SDKs talk to it exactly as to the real services (see TECH_NOTES §1-4, §8). Each
request is answered from a script: the first queued `Script` whose `match` occurs in the
request body (or the default reply). Requests, and connections the client closed early, are
recorded for inspection. Anthropic prompt caching is accounted: one entry per exact prefix
ending at a `cache_control` breakpoint, read back through a 20-block lookback, above a minimum
length, with a TTL refreshed on hit, usable once the writing response has begun.

Run it alone with `python -m apps.providers.emulator --port 8900`.
"""

from __future__ import annotations

import argparse
import asyncio
import threading

from aiohttp import web

from apps.providers.emulator.anthropic import AnthropicProtocol
from apps.providers.emulator.core import RecordedRequest, Script
from apps.providers.emulator.gemini import GeminiProtocol
from apps.providers.emulator.openai import OpenAIProtocol

__all__ = ["Emulator", "RecordedRequest", "Script", "main"]


class Emulator(AnthropicProtocol, OpenAIProtocol, GeminiProtocol):
    """Every protocol on one loopback port."""

    # --- app and lifecycle -----------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self.anthropic_messages)
        app.router.add_post("/v1/chat/completions", self.openai_chat)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_post("/v1/embeddings", self.openai_embeddings)
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self.azure_chat)
        app.router.add_get("/openai/models", self.azure_models)
        app.router.add_get("/v1beta/models", self.list_models)
        app.router.add_post(r"/{version:v1|v1beta}/models/{action}", self.gemini_generate)
        return app

    def start_in_thread(self, port: int = 0) -> Emulator:
        """Serve on 127.0.0.1 from a background thread (for tests); returns when listening."""
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._runner = web.AppRunner(self.app(), access_log=None)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", port)
            self._loop.run_until_complete(site.start())
            bound = self._runner.addresses[0][1]
            self.url = f"http://127.0.0.1:{bound}"
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=run, name="provider-emulator", daemon=True).start()
        if not ready.wait(10):
            raise RuntimeError("The provider emulator did not start.")
        return self

    def stop(self) -> None:
        if self._loop and self._runner:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)


def main() -> None:
    parser = argparse.ArgumentParser(description="Loopback emulator of LLM provider APIs.")
    parser.add_argument("--port", type=int, default=8900)
    args = parser.parse_args()
    web.run_app(Emulator().app(), host="127.0.0.1", port=args.port)
