"""Configuration comes from the environment; malformed values stop start-up clearly."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_list, env_redis_url, local_secrets

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("yes", True), ("off", False)])
def test_booleans_accept_the_usual_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("X_FLAG", raw)
    assert env_bool("X_FLAG") is expected


def test_a_malformed_boolean_is_refused(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG")


def test_integers_are_checked(monkeypatch):
    monkeypatch.setenv("X_NUM", "ten")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("X_NUM", 1)
    monkeypatch.setenv("X_NUM", "-3")
    with pytest.raises(ImproperlyConfigured, match="at least 0"):
        env_int("X_NUM", 1, minimum=0)


def test_lists_drop_blanks(monkeypatch):
    monkeypatch.setenv("X_LIST", " a, ,b ")
    assert env_list("X_LIST", []) == ["a", "b"]


def test_redis_urls_are_checked(monkeypatch):
    monkeypatch.setenv("X_REDIS", "localhost:6379")
    with pytest.raises(ImproperlyConfigured, match="not a Redis URL"):
        env_redis_url("X_REDIS", "redis://127.0.0.1:6379/0")


def test_local_secrets_are_generated_once_and_reused(tmp_path):
    path = tmp_path / "secrets.json"
    first = local_secrets(path)
    second = local_secrets(path)
    assert first == second
    assert len(first["SECRET_KEY"]) > 40
    assert oct(path.stat().st_mode)[-3:] == "600"


def _manage_check(**overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **overrides}
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DATABASE_URL", "nonsense", "DATABASE_URL='nonsense' is not a database URL"),
        ("DEBUG", "perhaps", "DEBUG='perhaps' is not a boolean"),
        ("REDIS_URL", "127.0.0.1:6379", "is not a Redis URL"),
        ("PARLEY_FLUSH_INTERVAL_MS", "fast", "is not an integer"),
        ("PARLEY_LOCAL_LOGIN", "false", "leaves no way to sign in"),
        ("PARLEY_OIDC_ISSUER", "https://id.example.test", "PARLEY_OIDC_CLIENT_ID and"),
    ],
)
def test_start_up_stops_with_a_clear_message(name, value, message):
    result = _manage_check(**{name: value})
    assert result.returncode != 0
    assert message in result.stderr


def test_a_request_that_meets_redis_away_gets_a_503_try_again(rf):
    from kombu.exceptions import OperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError

    from config.middleware import ServiceUnavailableMiddleware

    middleware = ServiceUnavailableMiddleware(lambda request: None)
    request = rf.post("/t/x/interrupt/")
    for error in (RedisConnectionError("Connection refused"), OperationalError("broker away")):
        response = middleware.process_exception(request, error)
        assert response.status_code == 503
        assert "try again" in response.content.decode()
        assert response["Retry-After"]
    assert middleware.process_exception(request, ValueError("a bug")) is None  # stays a 500


def test_a_client_that_left_is_not_logged_as_an_error_but_real_errors_are(caplog):
    """A request whose client went away leaves an unretrieved RequestAborted in a task (seen
    when a page is asked for while the web process starts): not worth a traceback."""
    import asyncio
    import gc

    from django.core.exceptions import RequestAborted

    async def client_gone():
        raise RequestAborted()

    async def broken():
        raise ValueError("a real failure")

    async def main():
        tasks = [asyncio.ensure_future(client_gone()), asyncio.ensure_future(broken())]
        await asyncio.sleep(0.01)
        del tasks

    with caplog.at_level("ERROR", logger="asyncio"):
        asyncio.run(main())
        gc.collect()
    logged = caplog.text
    assert "a real failure" in logged
    assert "RequestAborted" not in logged
