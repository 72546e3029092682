"""Django settings for Parley, read from the environment (see .env.example)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import (
    env_bool,
    env_int,
    env_list,
    env_redis_url,
    env_str,
    local_secrets,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("PARLEY_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", default=False)

_generated = None


def _secret(name: str) -> str:
    """Take a secret from the environment, else from the git-ignored local secrets file."""
    global _generated
    value = env_str(name)
    if value:
        return value
    if _generated is None:
        _generated = local_secrets(VAR_DIR / "local-secrets.json")
    return _generated[name]


SECRET_KEY = _secret("SECRET_KEY")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Comma-separated Fernet keys, newest first: data is written with the first, read with any.
PARLEY_ENCRYPTION_KEYS = env_list("PARLEY_ENCRYPTION_KEYS", [_secret("PARLEY_ENCRYPTION_KEYS")])

# Not "daphne": its app imports daphne's server, which installs Twisted's reactor in every
# process that sets Django up (the worker, the launcher that forks the web processes: see
# config/forking.py). The web process is daphne's own command line (config/web.py).
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "django.contrib.humanize",
    "apps.accounts",
    "apps.providers",
    "apps.roles",
    "apps.workspace",
    "apps.connectors",
    "apps.chat",
    "apps.library",
    "apps.imports",
    "apps.api",
    "ninja",  # its API docs page with the bundled Swagger UI (no CDN)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "apps.api.middleware.ApiErrorsMiddleware",
    "config.middleware.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "apps.accounts.oidc.middleware.ProviderRecheck",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.ServiceUnavailableMiddleware",
]


ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
LOGIN_URL = "login"
# Sign-in through the team's OpenID Connect provider (apps/accounts/oidc/): on when an issuer
# is set. Its endpoints come from the issuer's discovery document, read when first needed.
PARLEY_OIDC_ISSUER = env_str("PARLEY_OIDC_ISSUER")
PARLEY_OIDC_NAME = env_str("PARLEY_OIDC_NAME", "your organisation")  # "Sign in with …"
OIDC_RP_CLIENT_ID = env_str("PARLEY_OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_str("PARLEY_OIDC_CLIENT_SECRET")
OIDC_RP_SIGN_ALGO = env_str("PARLEY_OIDC_SIGN_ALGO", "RS256")
# Who may come in: e-mail domains, and groups (named in the ID token or userinfo claim
# PARLEY_OIDC_GROUPS_CLAIM); empty lists let everyone the provider vouches for in.
PARLEY_OIDC_ALLOWED_DOMAINS = [
    d.lower().lstrip("@") for d in env_list("PARLEY_OIDC_ALLOWED_DOMAINS", [])
]
PARLEY_OIDC_ALLOWED_GROUPS = env_list("PARLEY_OIDC_ALLOWED_GROUPS", [])
PARLEY_OIDC_GROUPS_CLAIM = env_str("PARLEY_OIDC_GROUPS_CLAIM", "groups")
# A first sign-in with no account of that verified e-mail creates one (false: the admin
# creates accounts, and the provider only proves who is signing in).
PARLEY_OIDC_CREATE_USERS = env_bool("PARLEY_OIDC_CREATE_USERS", default=True)
# Usernames and passwords on the sign-in page (and the admin's): off once the provider is the
# only way in. API tokens keep working either way.
PARLEY_LOCAL_LOGIN = env_bool("PARLEY_LOCAL_LOGIN", default=True)
if PARLEY_OIDC_ISSUER and not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
    raise ImproperlyConfigured(
        "PARLEY_OIDC_ISSUER is set: "
        "PARLEY_OIDC_CLIENT_ID and PARLEY_OIDC_CLIENT_SECRET are needed too."
    )
if not PARLEY_LOCAL_LOGIN and not PARLEY_OIDC_ISSUER:
    raise ImproperlyConfigured(
        "PARLEY_LOCAL_LOGIN=false leaves no way to sign in: set PARLEY_OIDC_ISSUER too."
    )
# Providers differ on a groups scope (some need it, some refuse one they do not know).
OIDC_RP_SCOPES = env_str(
    "PARLEY_OIDC_SCOPES",
    "openid email profile" + (" groups" if PARLEY_OIDC_ALLOWED_GROUPS else ""),
)
OIDC_USE_PKCE = True
OIDC_USE_NONCE = True
OIDC_STORE_ID_TOKEN = True  # the hint the provider's logout wants
OIDC_TIMEOUT = env_int("PARLEY_OIDC_TIMEOUT_SECONDS", 10, minimum=1)
# A signed-in page asks the provider again (silently) this often, so a person disabled there
# is signed out here within it.
OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS = env_int("PARLEY_OIDC_RECHECK_SECONDS", 900, minimum=1)
OIDC_OP_LOGOUT_URL_METHOD = "apps.accounts.oidc.views.provider_logout_url"
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_callback"
LOGIN_REDIRECT_URL_FAILURE = "login"
# The provider's backend and recheck are always installed, and idle while no issuer is set.
AUTHENTICATION_BACKENDS = [
    "apps.accounts.backends.PasswordBackend",
    "apps.accounts.oidc.backend.ProviderBackend",
]
LOGIN_REDIRECT_URL = "chat:session_list"
LOGOUT_REDIRECT_URL = "login"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database() -> dict[str, Any]:
    default = f"sqlite:///{VAR_DIR / 'parley.sqlite3'}"
    url = env_str("DATABASE_URL", default)
    try:
        parsed = dj_database_url.parse(url, conn_max_age=env_int("DB_CONN_MAX_AGE", 0, minimum=0))
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL={url!r} is not a database URL: {exc}") from exc
    config: dict[str, Any] = dict(parsed)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Web, worker threads and tests write concurrently: WAL plus immediate transactions
        # turn "database is locked" races into short waits, and a process's threads queue for
        # the writer on a lock of their own (config/sqlite/base.py).
        config["ENGINE"] = "config.sqlite"
        config["OPTIONS"] = {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
        # A file, not memory, so worker and server threads share it; one per test process.
        config["TEST"] = {"NAME": str(VAR_DIR / f"test-parley-{os.getpid()}.sqlite3")}
        if "DB_CONN_MAX_AGE" not in os.environ:
            # Opening a SQLite file costs more than most queries (and the init pragmas run on
            # every open): each thread keeps its connection.
            config["CONN_MAX_AGE"] = None
    elif config["ENGINE"] == "django.db.backends.postgresql":
        # A bounded pool per process: a worker's hundreds of streams share a few connections
        # (its database threads), far below PostgreSQL's max_connections. The pool, not
        # Django, keeps connections open, so CONN_MAX_AGE must stay 0.
        config["CONN_MAX_AGE"] = 0
        config.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": env_int("PARLEY_DB_POOL_SIZE", 16, minimum=1),
            "timeout": 30,
        }
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_redis_url("REDIS_URL", "redis://127.0.0.1:6379/0")
# Connections per process and pool (the live bus's and the live state's).
PARLEY_REDIS_MAX_CONNECTIONS = env_int("PARLEY_REDIS_MAX_CONNECTIONS", 1000, minimum=10)

# No channel layer: pushes to open tabs travel on Parley's live bus (apps/chat/livebus.py),
# read by one task per web process (apps/chat/live/relay.py).
CHANNEL_LAYERS: dict = {}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("PARLEY_CHANNEL_PREFIX", "parley"),
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_BROKER_TRANSPORT = "config.broker:Transport"  # survives losing Redis (see the module)
# Keep reconnecting however long Redis is away; the worker must outlive an outage.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The worker logs through LOGGING above (its scrubbing formatter), not Celery's own handlers.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TASK_DEFAULT_QUEUE = env_str("PARLEY_TASK_QUEUE", "parley")
# Replies are bounded by PARLEY_REPLY_TIMEOUT_SECONDS, far below the redelivery timeout.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 7200}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every start without it
# Stored files (attachments, PDFs' pages, the library, avatars), through Django's storage API:
# a folder (PARLEY_MEDIA_ROOT), or with PARLEY_STORAGE=s3 a bucket of S3-compatible object
# storage. Never served from MEDIA_URL: every file goes out through a view that checks the
# room's access rules. Import uploads wait in "imports" (apps/imports/staging.py): the media
# folder, another folder (PARLEY_IMPORTS_ROOT), or with PARLEY_STORAGE=s3 the bucket.
MEDIA_ROOT = Path(env_str("PARLEY_MEDIA_ROOT", str(VAR_DIR / "media")))
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "imports": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Sessions' workspaces (apps/workspace/files.py): a file written again replaces the old one.
PARLEY_WORKSPACE_ROOT = env_str("PARLEY_WORKSPACE_ROOT", str(VAR_DIR / "workspaces"))
STORAGES["workspace"] = {
    "BACKEND": "django.core.files.storage.FileSystemStorage",
    "OPTIONS": {"location": PARLEY_WORKSPACE_ROOT, "allow_overwrite": True},
}
if env_str("PARLEY_IMPORTS_ROOT"):  # else PARLEY_MEDIA_ROOT (followed when it changes)
    STORAGES["imports"]["OPTIONS"] = {"location": env_str("PARLEY_IMPORTS_ROOT")}
PARLEY_STORAGE = env_str("PARLEY_STORAGE", "local")
if PARLEY_STORAGE == "s3":
    from botocore.config import Config as _S3Config

    # Both of these inside the client's Config: given beside it, S3Storage ignores them.
    _s3_config = _S3Config(
        signature_version="s3v4",
        s3={"addressing_style": env_str("PARLEY_S3_ADDRESSING_STYLE", "path")},
    )
    STORAGES["default"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("PARLEY_S3_BUCKET", "parley"),
            "endpoint_url": env_str("PARLEY_S3_ENDPOINT_URL", "") or None,
            "region_name": env_str("PARLEY_S3_REGION", "us-east-1"),
            "client_config": _s3_config,
            "default_acl": None,  # the bucket's own policy: private
            "querystring_auth": True,
        },  # keys: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, read by boto3 itself
    }
    if not env_str("PARLEY_IMPORTS_ROOT"):  # a folder all machines share, if one is named
        STORAGES["imports"] = STORAGES["default"]
    STORAGES["workspace"] = {
        "BACKEND": STORAGES["default"]["BACKEND"],
        "OPTIONS": {
            **STORAGES["default"]["OPTIONS"],
            "location": "workspaces",
            "file_overwrite": True,
        },
    }
elif PARLEY_STORAGE != "local":
    raise ImproperlyConfigured(f"PARLEY_STORAGE={PARLEY_STORAGE!r}: use local or s3.")
# Serve straight from the app directories so `make run` needs no collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", default=False)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Behind a balancer that ends HTTPS and says so in X-Forwarded-Proto (deploy/nginx.conf does):
# requests are known to be secure. Only there: a client reaching Parley directly could claim it.
if env_bool("PARLEY_BEHIND_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Streaming behaviour.
# The longest a streaming reply's new text gathers before it goes out (under load: while a
# worker has time, each piece goes out as it comes; see apps/chat/live/pacing.py). Each push
# costs about 1 to 2 ms of CPU across the worker, Redis and the web.
PARLEY_FLUSH_INTERVAL_MS = env_int("PARLEY_FLUSH_INTERVAL_MS", 150, minimum=10)
# The shortest gathering time, even with time to spare (0: each piece as it comes).
PARLEY_FLUSH_MIN_MS = env_int("PARLEY_FLUSH_MIN_MS", 0, minimum=0)
PARLEY_CHECKPOINT_INTERVAL_MS = env_int("PARLEY_CHECKPOINT_INTERVAL_MS", 4000, minimum=100)
# Database threads of a worker's stream hub: they bound its database connections.
PARLEY_WORKER_DB_THREADS = env_int("PARLEY_WORKER_DB_THREADS", 8, minimum=1)
PARLEY_REPLY_TIMEOUT_SECONDS = env_int("PARLEY_REPLY_TIMEOUT_SECONDS", 900, minimum=5)
# Requests per minute each API token may make (beyond it: 429 with Retry-After).
PARLEY_API_RATE = env_str("PARLEY_API_RATE", "120/min")
# Live streams (`/threads/{id}/events`) open at once, per token and per person (all tokens).
PARLEY_API_STREAMS_PER_TOKEN = env_int("PARLEY_API_STREAMS_PER_TOKEN", 5, minimum=1)
PARLEY_API_STREAMS_PER_USER = env_int("PARLEY_API_STREAMS_PER_USER", 10, minimum=1)
# Every worker looks for replies left behind (a dead worker, a lost task) when it starts and
# then at this interval; 0 keeps only the look at start.
PARLEY_RECOVERY_INTERVAL_SECONDS = env_int("PARLEY_RECOVERY_INTERVAL_SECONDS", 1, minimum=0)
# `/metrics` answers only a scrape that sends this token (`Authorization: Bearer ...`); unset,
# it is off. (A metrics page tells strangers how busy the service is and with which models.)
PARLEY_METRICS_TOKEN = env_str("PARLEY_METRICS_TOKEN", "")
# A reply taken over this many times (its worker died each time) ends as an error instead.
PARLEY_MAX_REPLY_ATTEMPTS = env_int("PARLEY_MAX_REPLY_ATTEMPTS", 3, minimum=1)
# A role's lorebook: at most this many tokens of its entries go into one reply's context
# (a card's own `token_budget` wins, up to 8,192).
PARLEY_LOREBOOK_TOKENS = env_int("PARLEY_LOREBOOK_TOKENS", 1024, minimum=0)
# The library's vectors (apps/library/vectors.py): "auto" takes them from the session's provider
# where it gives embeddings (OpenAI, Gemini, Ollama) and from the embedded model otherwise;
# "local" always from the embedded model; "off" searches the full text alone.
PARLEY_LIBRARY_VECTORS = env_str("PARLEY_LIBRARY_VECTORS", "auto")
if PARLEY_LIBRARY_VECTORS not in ("auto", "local", "off"):
    raise ImproperlyConfigured("PARLEY_LIBRARY_VECTORS is one of auto, local or off.")
PARLEY_MAX_MESSAGE_CHARS = env_int("PARLEY_MAX_MESSAGE_CHARS", 100_000, minimum=100)
# Imports (ChatGPT, Claude, Open WebUI, LibreChat, Parley exports): the largest file taken.
PARLEY_IMPORT_MAX_BYTES = env_int("PARLEY_IMPORT_MAX_BYTES", 2 * 1024**3, minimum=1024)
# The most one HTTP request may carry (config/daphne_bodies.py): a bigger one is answered 413
# as it arrives, its bytes never kept. Uploads over 1 MB are kept on disk, never in memory.
PARLEY_MAX_REQUEST_MB = env_int("PARLEY_MAX_REQUEST_MB", 1024, minimum=1)
FILE_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
# Each file is read in a child process under these ceilings (apps/imports/sandbox.py): its
# address space, and the CPU seconds it may spend (a base, plus a share per MB of the file).
# An upload left waiting this long (never finished, or read and never imported) is deleted.
PARLEY_IMPORT_UPLOAD_HOURS = env_int("PARLEY_IMPORT_UPLOAD_HOURS", 24, minimum=1)
# How often one of the workers runs the retention sweep (files nothing uses any more).
PARLEY_RETENTION_SWEEP_MINUTES = env_int("PARLEY_RETENTION_SWEEP_MINUTES", 60, minimum=0)  # 0: off
PARLEY_IMPORT_MEMORY_MB = env_int("PARLEY_IMPORT_MEMORY_MB", 1024, minimum=256)
PARLEY_IMPORT_CPU_SECONDS = env_int("PARLEY_IMPORT_CPU_SECONDS", 60, minimum=1)
PARLEY_IMPORT_CPU_SECONDS_PER_MB = env_int("PARLEY_IMPORT_CPU_SECONDS_PER_MB", 1, minimum=0)
# Demo provider pacing: about 300 ms to the first token and 40 tokens per second.
PARLEY_DEMO_FIRST_TOKEN_MS = env_int("PARLEY_DEMO_FIRST_TOKEN_MS", 300, minimum=0)
PARLEY_DEMO_TOKENS_PER_SECOND = env_int("PARLEY_DEMO_TOKENS_PER_SECOND", 40, minimum=1)

# Group chat.
PARLEY_DEFAULT_ROLE_PACK = env_str("PARLEY_DEFAULT_ROLE_PACK", "film-crew")
PARLEY_MAX_AUTO_ROUNDS = env_int("PARLEY_MAX_AUTO_ROUNDS", 10, minimum=0)
# Tool results over these are trimmed for the model (most relevant items kept; the whole
# result is stored and shown in the bubble): characters per item, and per round of calls.
PARLEY_TOOL_ITEM_CHARS = env_int("PARLEY_TOOL_ITEM_CHARS", 1500, minimum=200)
PARLEY_TOOL_ROUND_CHARS = env_int("PARLEY_TOOL_ROUND_CHARS", 8000, minimum=1000)
# Each session's folder of files (uploads, and what write-capable roles write), with a quota.
PARLEY_WORKSPACE_QUOTA_MB = env_int("PARLEY_WORKSPACE_QUOTA_MB", 50, minimum=1)
# User-added MCP servers may not point at loopback, private or link-local addresses unless
# this is on (a single-user machine that runs its own servers, say).
PARLEY_MCP_ALLOW_PRIVATE_URLS = env_bool("PARLEY_MCP_ALLOW_PRIVATE_URLS", False)
# Anthropic fan-outs start one role first and the rest once its response has begun, so they
# read the shared prefix it writes to the prompt cache instead of each paying the write.
PARLEY_STAGGER_FANOUT = env_bool("PARLEY_STAGGER_FANOUT", default=True)
# Above this estimated prompt size the older transcript is summarised (in the request only).
PARLEY_SUMMARY_THRESHOLD_TOKENS = env_int("PARLEY_SUMMARY_THRESHOLD_TOKENS", 60_000, minimum=500)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "config.logs.ScrubbingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        }
    },
    "filters": {
        "client_gone": {"()": "config.logs.ClientGoneFilter"},
        "refusal": {"()": "config.logs.RefusalFilter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        "asyncio": {"filters": ["client_gone"]},
        "django.request": {"filters": ["refusal"]},
    },
}
