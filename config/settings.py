"""Settings, all from the environment.

The embedded default is SQLite under ``var/`` with no other service. ``DATABASE_URL`` switches
to PostgreSQL (psycopg 3); ``Q_BROKER=redis`` moves django-q2 to Redis for several machines.
"""

# long-module: every setting is read from the environment here, grouped by concern; one file is
# what an operator greps for a variable name.

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url

from config.object_storage import storages_from_env

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)  # the embedded default's database and files live here


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def env_floats(name: str, default: str) -> list[float]:
    """A comma-separated list of numbers, e.g. ``"5,300,1800"`` (empty: no numbers)."""
    return [float(part) for part in os.environ.get(name, default).split(",") if part.strip()]


DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    """``SECRET_KEY``, or the key kept in ``SECRET_KEY_FILE`` (created on first use). On the
    embedded default (no ``DATABASE_URL``) the file defaults to ``var/secret_key``, so every
    ``manage.py`` command of one machine shares the key ``make run`` created; a deployment on
    PostgreSQL names its key itself. Without one only DEBUG may start, with a throwaway key.

    Signed cookies, password reset links and django-q2's signed (pickled) task packages all rest
    on it: a public default would let anyone who can write to the broker run code on the workers.
    """
    key = os.environ.get("SECRET_KEY", "")
    key_file = os.environ.get("SECRET_KEY_FILE", "")
    if not key and not key_file and not os.environ.get("DATABASE_URL"):
        key_file = str(VAR_DIR / "secret_key")
    if not key and key_file:
        path = Path(key_file) if Path(key_file).is_absolute() else BASE_DIR / key_file
        if not path.exists():
            import secrets

            path.parent.mkdir(parents=True, exist_ok=True)
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
                out.write(secrets.token_urlsafe(50))
        key = path.read_text().strip()
    if key and key not in _PUBLIC_KEYS:
        return key
    if DEBUG:
        import secrets

        return secrets.token_urlsafe(50)  # throwaway: sessions end with the process
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "SECRET_KEY is not set (or is a public example). Set SECRET_KEY or SECRET_KEY_FILE (a "
        "deployment with DATABASE_URL must name its key), or DEBUG=1 for development."
    )


_PUBLIC_KEYS = frozenset({"insecure-development-key-set-SECRET_KEY-in-production", "changeme", "secret"})
SECRET_KEY = _secret_key()
# Earlier keys, comma-separated, after a rotation: sessions and signed values made with them stay
# valid, and stored credentials (webhook secrets) encrypted with them still decrypt until
# `manage.py encrypt_secrets` writes them again with SECRET_KEY.
SECRET_KEY_FALLBACKS = [k.strip() for k in os.environ.get("SECRET_KEY_FALLBACKS", "").split(",") if k.strip()]
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # jobs before django_q: its ``qcluster`` command (a draining leader around django-q2's
    # cluster) takes the place of django-q2's own.
    "jobs",
    "django_q",
    "documents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "config.body_auth.BodyAfterAuthenticationMiddleware",  # before the CSRF check reads a form
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.security.ContentSecurityPolicyMiddleware",
]

# --- HTTPS and browser protections, from the environment (check --deploy is clean with them set) --
# Behind a TLS-terminating proxy, SECURE_PROXY_SSL_HEADER=1 trusts its X-Forwarded-Proto: only
# when that proxy is the only way in (as TRUSTED_PROXY_COUNT).
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]
# Sent on every response when set, e.g. "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'".
CONTENT_SECURITY_POLICY = os.environ.get("CONTENT_SECURITY_POLICY", "")

ROOT_URLCONF = "config.urls"
TEMPLATES: list[dict[str, Any]] = [
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
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"


# Threads of a web worker that run sync views (the API and the pages; config/dispatch.py). A
# thread is held only while Django runs the request (small bodies are read before, answers sent
# after, on the event loop), as a gunicorn sync worker behind a buffering proxy. More threads per
# process lose to contention for the interpreter lock (bench/README.md, status endpoint): to
# serve more requests at once, run more workers (WEB_WORKERS).
WEB_THREADS = env_int("WEB_THREADS", 1)

# The serving edge's limits (docs/limits.md, "The web server"). granian enforces the first four
# before the application is called; config/edge.py the body and send deadlines.
WEB_MAX_HEADER_BYTES = env_int("WEB_MAX_HEADER_BYTES", 64 * 1024)  # request line + headers
WEB_HEADER_SECONDS = env_float("WEB_HEADER_SECONDS", 10.0)  # to send them; also the keep-alive idle
WEB_MAX_REQUESTS = env_int("WEB_MAX_REQUESTS", 2048)  # connections served at once, per worker
WEB_BODY_IDLE_SECONDS = env_float("WEB_BODY_IDLE_SECONDS", 15.0)  # between two parts of a body
WEB_BODY_SECONDS = env_float("WEB_BODY_SECONDS", 300.0)  # for the whole body
WEB_SEND_SECONDS = env_float("WEB_SEND_SECONDS", 30.0)  # for the client to take each part of an answer


def database_config() -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'platform.sqlite3'}"
    db: dict[str, Any] = dict(dj_database_url.parse(url))
    if db["ENGINE"] == "django.db.backends.sqlite3":
        # Several processes (web, q2 workers, reaper) share the file: WAL lets readers run beside
        # the writer, IMMEDIATE takes the write lock at BEGIN so two writers queue instead of
        # failing on upgrade, and the timeout is how long they queue. Reads go through a memory
        # map of the file (up to SQLITE_MMAP_BYTES) instead of a read() call and a copy per page:
        # the dense ranking reads every in-scope vector, and at 100k chunks this halves its time
        # (bench/search_scale.py).
        db["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                f"PRAGMA mmap_size={env_int('SQLITE_MMAP_BYTES', 1 << 30)};"
            ),
        }
        # A file, not memory, so that test processes (qcluster, web server) see the test database.
        db["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
    else:
        # Workers and the reaper keep their connection (DB_CONN_MAX_AGE=60; django-q2 otherwise
        # reconnects around every broker call); the ASGI server uses the pool instead, since
        # persistent connections there leak one per request thread.
        db["CONN_MAX_AGE"] = 0 if env_bool("DB_POOL") else env_int("DB_CONN_MAX_AGE", 0)
        db["CONN_HEALTH_CHECKS"] = True  # a restarted database is noticed before reuse
        # The status endpoint's reads (documents/hot_reads.py) are prepared after 5 runs on a
        # connection; the ORM binds on the client and never is. Off (DB_PREPARED_STATEMENTS=0)
        # behind a pooler in transaction mode that cannot keep named statements.
        prepare = {"prepare_threshold": 5 if env_bool("DB_PREPARED_STATEMENTS", True) else None}
        if env_bool("DB_POOL"):
            # The web server runs sync requests on WEB_THREADS threads (each may rank a hybrid
            # search's full text on a second connection, documents/search.py), and the event
            # streams' opening reads on threads of their own; a pool bounds the connections. Its
            # checkout check looks for a closed socket instead of sending a query
            # (config/postgresql, config/db_pool.py).
            db["ENGINE"] = "config.postgresql"
            pool_max = env_int("DB_POOL_MAX", max(8, 2 * WEB_THREADS + 2))
            db["OPTIONS"] = {"pool": {"min_size": 1, "max_size": pool_max}}
        db["OPTIONS"] = {**db.get("OPTIONS", {}), **prepare}
    return db


DATABASES = {"default": database_config()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]
# The password backend with a lockout after repeated failures (documents/throttles.py).
AUTHENTICATION_BACKENDS = ["documents.throttles.LockoutModelBackend"]
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
# The admin's dates: one format per locale with the zone named (config/formats/<lang>/).
FORMAT_MODULE_PATH = ["config.formats"]
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))
MEDIA_URL = "media/"
# Uploaded files: under MEDIA_ROOT, or with STORAGE_BACKEND=s3 in an S3-compatible bucket (the
# STORAGE_S3_* variables, config/object_storage.py).
STORAGES = storages_from_env(os.environ)
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

REST_FRAMEWORK: dict[str, Any] = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "documents.api.auth.TenantTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON with bounded nesting and list sizes (documents/api/parsers.py), then forms.
    "DEFAULT_PARSER_CLASSES": [
        "documents.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "documents.api.errors.handle_exception",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Rates of documents/throttles.py (per user and per client address), counted in the shared
    # "throttle" cache; "n/second|minute|hour|day".
    "DEFAULT_THROTTLE_RATES": {
        # A batch counts one per file: the upload rate must hold a batch of the most files (100)
        # and keep up with the workers on small files; the queue quota (max_queued_jobs) is what
        # holds uploads back to the workers' pace.
        "upload_user": os.environ.get("THROTTLE_UPLOAD_USER", "600/min"),
        "upload_ip": os.environ.get("THROTTLE_UPLOAD_IP", "1200/min"),
        "search_user": os.environ.get("THROTTLE_SEARCH_USER", "120/min"),
        "search_ip": os.environ.get("THROTTLE_SEARCH_IP", "240/min"),
        # Registering or changing webhook endpoints (each resolves the URL's host).
        "webhook_user": os.environ.get("THROTTLE_WEBHOOK_USER", "20/min"),
        # every other write (collections, webhooks, re-index, cancel, retry, delete, /v1 changes)
        "write_user": os.environ.get("THROTTLE_WRITE_USER", "120/min"),
        "write_ip": os.environ.get("THROTTLE_WRITE_IP", "240/min"),
    },
    # Writes are throttled unless a view names its own throttles (uploads, search).
    "DEFAULT_THROTTLE_CLASSES": [
        "documents.throttles.WriteUserThrottle",
        "documents.throttles.WriteAddressThrottle",
    ],
    # Proxies in front of the web tier whose X-Forwarded-For is believed (0: the socket address).
    "NUM_PROXIES": env_int("TRUSTED_PROXY_COUNT", 0),
}
AUTH_FAILURE_WINDOW_SECONDS = env_int("AUTH_FAILURE_WINDOW_SECONDS", 900)
AUTH_FAILURE_LIMIT_PER_ADDRESS = env_int("AUTH_FAILURE_LIMIT_PER_ADDRESS", 50)  # bad tokens or passwords
# Seconds a web process remembers a good API token (documents/api/token_cache.py): a revoked
# token or deactivated user is refused at once by the process that made the change and within
# this bound by the others. 0: every request reads the token from the database.
API_TOKEN_CACHE_SECONDS = env_int("API_TOKEN_CACHE_SECONDS", 5)
# Wrong passwords for one user name from one client address before that pair is locked out for
# AUTH_FAILURE_WINDOW_SECONDS (AUTH_FAILURE_LIMIT_PER_ADDRESS bounds an address over all names).
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10)
# Counters of throttles, lockouts and SSE caps must be shared by every web process: the database
# cache on the embedded default (its table comes with the migrations), Redis when configured.
_THROTTLE_REDIS_URL = os.environ.get("THROTTLE_REDIS_URL") or (
    os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0") if os.environ.get("Q_BROKER") == "redis" else ""
)
CACHES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _THROTTLE_REDIS_URL}
        if _THROTTLE_REDIS_URL
        else {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "throttle_cache"}
    ),
}
SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "Document ingestion API",
    "DESCRIPTION": "Upload documents, follow their processing live, search what is published.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # One name for the search modes, whether a field takes one (search) or several (evaluation).
    "ENUM_NAME_OVERRIDES": {"SearchModeEnum": "documents.search.MODES"},
    # The schema and the docs page need a login or a token unless API_SCHEMA_PUBLIC=1.
    "SERVE_PERMISSIONS": [
        "rest_framework.permissions.AllowAny"
        if env_bool("API_SCHEMA_PUBLIC", False)
        else "rest_framework.permissions.IsAuthenticated"
    ],
    # Both trailing-slash forms are served (documents/api/urls.py); the schema lists each once.
    "PREPROCESSING_HOOKS": ["documents.api.schema.drop_slash_twins"],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "documents.api.schema.add_event_stream",
    ],
}
SSE_KEEPALIVE_SECONDS = env_float("SSE_KEEPALIVE_SECONDS", 15)
# Open event streams per user and in all (counted in the shared "throttle" cache), and how long
# one stream lives before the client reconnects with Last-Event-ID.
SSE_MAX_STREAMS_PER_USER = env_int("SSE_MAX_STREAMS_PER_USER", 20)
SSE_MAX_STREAMS = env_int("SSE_MAX_STREAMS", 2000)
SSE_MAX_STREAM_SECONDS = env_float("SSE_MAX_STREAM_SECONDS", 600)

# --- the job engine -------------------------------------------------------------------------
# Seconds a claim or heartbeat keeps the lease; the heartbeat renews it every third of that.
JOBS_LEASE_SECONDS = env_float("JOBS_LEASE_SECONDS", 30)
JOBS_HEARTBEAT_SECONDS = env_float("JOBS_HEARTBEAT_SECONDS", JOBS_LEASE_SECONDS / 3)
# The reaper's loop period: a dead worker's job is stalled within lease + period (30 + 10 < 45 s).
JOBS_REAPER_INTERVAL = env_float("JOBS_REAPER_INTERVAL", 10)
# A queued, due job with no claim this long after its dispatch lost its q2 task (< 2 minutes).
JOBS_REDISPATCH_AFTER = env_float("JOBS_REDISPATCH_AFTER", 60)
# Progress events are appended at most this often per job.
JOBS_PROGRESS_EVENT_SECONDS = env_float("JOBS_PROGRESS_EVENT_SECONDS", 1.0)
# A handler stuck this long past its deadline in uninterruptible code ends its worker process.
JOBS_STUCK_EXIT_SECONDS = env_float("JOBS_STUCK_EXIT_SECONDS", 30)
# After SIGTERM the q2 cluster's whole process tree exits within this many seconds: workers hand
# their jobs back at a safe point (jobs/drain.py), the leader kills what is left at the bound.
# Service managers should allow a little more (the shipped systemd units: TimeoutStopSec=30).
JOBS_DRAIN_SECONDS = env_float("JOBS_DRAIN_SECONDS", 20)
# A worker writes progress at most this often (the last unit of a stage is always written).
JOBS_PROGRESS_WRITE_SECONDS = env_float("JOBS_PROGRESS_WRITE_SECONDS", 0.5)
# A worker sweeps the temp directory for what dead workers of its machine left at most this often.
JOBS_SCRATCH_SWEEP_SECONDS = env_float("JOBS_SCRATCH_SWEEP_SECONDS", 300)
# Where job temp directories live; default: a folder of this deployment (named after its
# database) in the temp directory, so that deployments sharing a machine never sweep each other's.
JOBS_SCRATCH_DIR = os.environ.get("JOBS_SCRATCH_DIR", "")
# Failure causes' alert thresholds, failed attempts an hour, overriding each cause's own (0: never
# alert), e.g. "sandbox_failed:10,worker_lost:0" (the health page, /metrics' jobs_cause_alerting).
JOBS_CAUSE_ALERTS = {
    code.strip(): int(count)
    for code, _, count in (
        part.partition(":") for part in os.environ.get("JOBS_CAUSE_ALERTS", "").split(",") if part.strip()
    )
}
# Extra modules that register pipelines (tests and add-ons; apps register in ready()).
JOBS_PIPELINE_MODULES = [m for m in os.environ.get("JOBS_PIPELINE_MODULES", "").split(",") if m]
# --- engine speed (bench/README.md, "Speed where users feel it") ------------------------------
# PostgreSQL: the worker's claims, stage moves, progress, checkpoints and output batches commit
# without waiting for the WAL flush (jobs/durability.py); terminal transitions never do.
JOBS_RELAXED_COMMIT = env_bool("JOBS_RELAXED_COMMIT", True)

# --- metrics (/metrics) -----------------------------------------------------------------------
# Scrapers send "Authorization: Bearer <METRICS_TOKEN>"; METRICS_ALLOWED_IPS (addresses or
# networks, comma-separated) restricts who may ask. With neither set, /metrics is closed.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_ALLOWED_IPS = [a.strip() for a in os.environ.get("METRICS_ALLOWED_IPS", "").split(",") if a.strip()]

# --- documents ------------------------------------------------------------------------------
# Folder sources (docs/sources.md): the folders under which a source's folder may lie, separated
# by the path separator (":"), symlinks resolved. Empty: folder sources are refused.
SOURCES_ALLOWED_ROOTS = [
    p for p in os.environ.get("SOURCES_ALLOWED_ROOTS", "").split(os.pathsep) if p.strip()
]
# S3-compatible bucket sources (docs/sources.md, "S3-compatible buckets"): an endpoint must be
# https unless SOURCES_S3_ALLOW_HTTP is set, and must resolve to public addresses only, unless
# they lie in one of SOURCES_S3_ALLOWED_NETWORKS (comma-separated, e.g. "10.20.0.0/16": a MinIO
# or SeaweedFS on the operator's own network) or SOURCES_S3_ALLOW_PRIVATE is set (any address,
# the cloud's metadata service included); checked when a source is made or changed and at each
# stage of a sync, whose connections all go to the checked address.
SOURCES_S3_ALLOW_HTTP = env_bool("SOURCES_S3_ALLOW_HTTP")
SOURCES_S3_ALLOWED_NETWORKS = [
    n.strip() for n in os.environ.get("SOURCES_S3_ALLOWED_NETWORKS", "").split(",") if n.strip()
]
SOURCES_S3_ALLOW_PRIVATE = env_bool("SOURCES_S3_ALLOW_PRIVATE")
# Seconds to connect to a bucket's endpoint and to wait for each answer, and the attempts of one
# request (so a dead endpoint fails a sync instead of holding a worker).
SOURCES_S3_CONNECT_TIMEOUT = env_float("SOURCES_S3_CONNECT_TIMEOUT", 5)
SOURCES_S3_READ_TIMEOUT = env_float("SOURCES_S3_READ_TIMEOUT", 30)
SOURCES_S3_MAX_ATTEMPTS = env_int("SOURCES_S3_MAX_ATTEMPTS", 3)
DOCUMENTS_MAX_UPLOAD_BYTES = env_int("DOCUMENTS_MAX_UPLOAD_BYTES", 50 * 1024 * 1024)
# Web sources (docs/sources.md, "Web sites"): a site must be on the public internet unless its
# addresses lie in one of these networks (comma-separated, e.g. "10.20.0.0/16,192.168.5.7/32"),
# checked at every request and redirect like webhook targets (WEBHOOK_ALLOW_PRIVATE does not apply).
SOURCES_WEB_ALLOWED_NETWORKS = [
    n.strip() for n in os.environ.get("SOURCES_WEB_ALLOWED_NETWORKS", "").split(",") if n.strip()
]
# Seconds one request of a web source may take in all (resolving, connecting, every redirect hop,
# the whole answer), and one listing (the crawl or the sitemap): keep it under the sync stage's
# no-progress deadline of 300 seconds.
SOURCES_WEB_TIMEOUT = env_float("SOURCES_WEB_TIMEOUT", 20)
SOURCES_WEB_LISTING_TIMEOUT = env_float("SOURCES_WEB_LISTING_TIMEOUT", 240)
# The most a web source's "page_limit" and "max_depth" may be, and the most bytes one page may
# have (the upload limit applies too).
SOURCES_WEB_MAX_PAGES = env_int("SOURCES_WEB_MAX_PAGES", 1000)
SOURCES_WEB_MAX_DEPTH = env_int("SOURCES_WEB_MAX_DEPTH", 10)
SOURCES_WEB_MAX_PAGE_BYTES = env_int("SOURCES_WEB_MAX_PAGE_BYTES", 10 * 1024 * 1024)
# The longest robots.txt "Crawl-delay" honoured, in seconds (a longer one is cut to this): the
# waits count against SOURCES_WEB_LISTING_TIMEOUT, so a slow site's listing stays bounded.
SOURCES_WEB_MAX_CRAWL_DELAY = env_float("SOURCES_WEB_MAX_CRAWL_DELAY", 5)
# The request body limit, checked before authentication (config/body_limit.py, documents/uploads.py):
# the upload limit plus room for the multipart envelope and form fields.
REQUEST_MAX_BODY_BYTES = env_int("REQUEST_MAX_BODY_BYTES", DOCUMENTS_MAX_UPLOAD_BYTES + 1024 * 1024)
FILE_UPLOAD_HANDLERS = [
    "documents.uploads.BodyLimitUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
OCR_ENGINE = os.environ.get("OCR_ENGINE", "")  # tesseract | rapidocr | "" (whichever is installed)
OCR_BATCH_SIZE = env_int("OCR_BATCH_SIZE", 4)
OCR_DPI = env_int("OCR_DPI", 200)
OCR_TESSERACT_TIMEOUT = env_float("OCR_TESSERACT_TIMEOUT", 120)
OCR_RAPIDOCR_THREADS = env_int("OCR_RAPIDOCR_THREADS", 0)  # 0: rapidocr's own choice
# Tesseract's language codes, joined by "+" as its -l option takes them (rapidocr reads eng and chi_sim).
OCR_LANGUAGES = tuple(
    code.strip() for code in os.environ.get("OCR_LANGUAGES", "").replace(",", "+").split("+") if code.strip()
) or ("eng", "chi_sim")
CHUNK_TARGET_TOKENS = env_int("CHUNK_TARGET_TOKENS", 350)
CHUNK_MAX_TOKENS = env_int("CHUNK_MAX_TOKENS", 500)
EMBEDDING_BATCH_SIZE = env_int("EMBEDDING_BATCH_SIZE", 64)
INDEX_BATCH_SIZE = env_int("INDEX_BATCH_SIZE", 500)
# Dense candidates at or under this cosine similarity share nothing with the query; never applied
# to full-text matches (documents.search). Unset: the embedder's own floor (hashing 0.05, the local
# MiniLM 0.3, HTTP and sentence-transformers models 0).
SEARCH_MIN_SCORE = env_float("SEARCH_MIN_SCORE", -1.0)
# PostgreSQL: a hybrid search runs its full-text ranking on a second connection while the query
# is embedded and ranked by meaning, so it waits for the longer of the two, not their sum.
SEARCH_CONCURRENT = env_bool("SEARCH_CONCURRENT", True)
# local (all-MiniLM-L6-v2 from its pip package, no torch, offline) | hashing (lexical, no model)
# | http (OpenAI-compatible) | sentence-transformers (optional extra)
EMBEDDINGS_BACKEND = os.environ.get("EMBEDDINGS_BACKEND", "local")
# Compute threads per process for the local model (onnxruntime's intra-op pool, or BLAS for the
# numpy runtime): workers are processes, so 1 avoids oversubscribing cores.
EMBEDDINGS_LOCAL_THREADS = env_int("EMBEDDINGS_LOCAL_THREADS", 1)
# Texts per forward pass; 0: the runtime's own (onnx 2, numpy 8).
EMBEDDINGS_LOCAL_BATCH_SIZE = env_int("EMBEDDINGS_LOCAL_BATCH_SIZE", 0)
# onnx (a graph built from the model's weights at load, run by onnxruntime) | numpy (the same
# vectors, the reference forward pass, a half to a third of the speed): bench/README.md "Embedding model".
EMBEDDINGS_LOCAL_RUNTIME = os.environ.get("EMBEDDINGS_LOCAL_RUNTIME", "onnx")
# EMBEDDINGS_BACKEND=e5 only: onnx (the package's weights on onnxruntime) | engine (the package's
# C engine; the same vectors, under half the speed): bench/README.md "e5 on onnxruntime".
EMBEDDINGS_E5_RUNTIME = os.environ.get("EMBEDDINGS_E5_RUNTIME", "onnx")
EMBEDDINGS_HASHING_DIMENSION = env_int("EMBEDDINGS_HASHING_DIMENSION", 1024)
# The widest vector an embedder may make (checked where an embedder is chosen: the re-index API and
# command, and the configured one at start): "hashing:1000000" would store 4 MB per chunk.
EMBEDDINGS_MAX_DIMENSION = env_int("EMBEDDINGS_MAX_DIMENSION", 4096)
EMBEDDINGS_HTTP_BASE_URL = os.environ.get("EMBEDDINGS_HTTP_BASE_URL", "")
EMBEDDINGS_HTTP_MODEL = os.environ.get("EMBEDDINGS_HTTP_MODEL", "")
EMBEDDINGS_HTTP_API_KEY = os.environ.get("EMBEDDINGS_HTTP_API_KEY", "")
EMBEDDINGS_HTTP_DIMENSION = env_int("EMBEDDINGS_HTTP_DIMENSION", 0)
EMBEDDINGS_HTTP_BATCH_SIZE = env_int("EMBEDDINGS_HTTP_BATCH_SIZE", 64)
EMBEDDINGS_HTTP_TIMEOUT = env_float("EMBEDDINGS_HTTP_TIMEOUT", 30)
EMBEDDINGS_HTTP_MAX_CONCURRENCY = env_int("EMBEDDINGS_HTTP_MAX_CONCURRENCY", 4)
# The most tokens the provider's model takes of one text (chunks are cut to fit, measured by a
# safe estimate): 512 suits most open models; OpenAI's text-embedding-3 models take 8191.
EMBEDDINGS_HTTP_WINDOW = env_int("EMBEDDINGS_HTTP_WINDOW", 512)
EMBEDDINGS_ST_MODEL = os.environ.get("EMBEDDINGS_ST_MODEL", "sentence-transformers/all-MiniLM-L6-v2")

# --- security and limits (docs/limits.md lists them all) -------------
# The parsing sandbox: a child process per worker reads untrusted bytes under these limits.
DOCUMENTS_SANDBOX_CPU_SECONDS = env_int("DOCUMENTS_SANDBOX_CPU_SECONDS", 120)  # per call
DOCUMENTS_SANDBOX_WALL_SECONDS = env_float("DOCUMENTS_SANDBOX_WALL_SECONDS", 90)  # per call
DOCUMENTS_SANDBOX_MEMORY_BYTES = env_int("DOCUMENTS_SANDBOX_MEMORY_BYTES", 2 * 1024**3)  # address space
DOCUMENTS_SANDBOX_MAX_CALLS = env_int("DOCUMENTS_SANDBOX_MAX_CALLS", 500)  # then a fresh child
# Walled in: one fork server per worker, a freshly forked process per call (off: a child per input file)
DOCUMENTS_SANDBOX_FORK_SERVER = env_bool("DOCUMENTS_SANDBOX_FORK_SERVER", True)
# Its walls (documents/sandbox/isolation.py, docs/deployment.md): bubblewrap namespaces when they work
# here; REQUIRE_ISOLATION refuses to parse without them instead of a warning.
DOCUMENTS_SANDBOX_REQUIRE_ISOLATION = env_bool("DOCUMENTS_SANDBOX_REQUIRE_ISOLATION", False)
DOCUMENTS_SANDBOX_UID = env_int("DOCUMENTS_SANDBOX_UID", 65534)  # the child's user when the worker is root
DOCUMENTS_SANDBOX_FILE_BYTES = env_int("DOCUMENTS_SANDBOX_FILE_BYTES", 512 * 1024**2)  # its largest file
DOCUMENTS_SANDBOX_SCRATCH_BYTES = env_int("DOCUMENTS_SANDBOX_SCRATCH_BYTES", 1024**3)  # its tmpfs
DOCUMENTS_SANDBOX_PROCESSES = env_int("DOCUMENTS_SANDBOX_PROCESSES", 256)  # RLIMIT_NPROC (threads count)
DOCUMENTS_SANDBOX_EXTRA_MODULES = [
    m for m in os.environ.get("DOCUMENTS_SANDBOX_EXTRA_MODULES", "").split(",") if m
]
DOCUMENTS_PARSE_BATCH_PAGES = env_int("DOCUMENTS_PARSE_BATCH_PAGES", 50)  # pages per sandbox call
DOCUMENTS_MAX_PAGES = env_int("DOCUMENTS_MAX_PAGES", 10_000)
DOCUMENTS_MAX_TEXT_CHARS = env_int("DOCUMENTS_MAX_TEXT_CHARS", 20_000_000)
DOCUMENTS_MAX_HTML_DEPTH = env_int("DOCUMENTS_MAX_HTML_DEPTH", 25_000)
DOCUMENTS_MAX_LINE_CHARS = env_int("DOCUMENTS_MAX_LINE_CHARS", 1_000_000)  # Markdown (pattern-based)
DOCUMENTS_MAX_RENDER_PIXELS = env_int("DOCUMENTS_MAX_RENDER_PIXELS", 100_000_000)  # a page rendered for OCR
DOCUMENTS_MAX_CHUNKS = env_int("DOCUMENTS_MAX_CHUNKS", 50_000)  # per version
# DOCX zip members, checked on the archive's directory at upload (code docx_bomb).
DOCUMENTS_DOCX_MAX_MEMBER_BYTES = env_int("DOCUMENTS_DOCX_MAX_MEMBER_BYTES", 100 * 1024**2)
DOCUMENTS_DOCX_MAX_XML_BYTES = env_int("DOCUMENTS_DOCX_MAX_XML_BYTES", 25 * 1024**2)
DOCUMENTS_DOCX_MAX_TOTAL_BYTES = env_int("DOCUMENTS_DOCX_MAX_TOTAL_BYTES", 300 * 1024**2)

# --- django-q2 ------------------------------------------------------------------------------
Q_TIMEOUT = env_int("Q_TIMEOUT", 3600)
# The q2 queue (and cluster name) of webhook deliveries: one of Q_CLUSTER's ALT_CLUSTERS.
WEBHOOK_QUEUE = os.environ.get("WEBHOOK_QUEUE", "webhooks")
Q_CLUSTER: dict[str, Any] = {
    "name": os.environ.get("Q_NAME", "ingest"),
    "workers": env_int("Q_WORKERS", 2),
    # Tasks a worker process runs before q2 replaces it (its memory and its sandbox fork server
    # start afresh); q2's default.
    "recycle": env_int("Q_RECYCLE", 500),
    # The job table is the truth: a task killed by timeout is recovered by the reaper through
    # the lease, so q2 must not deliver it again by itself while it may still be running.
    "timeout": Q_TIMEOUT,
    "retry": Q_TIMEOUT + 60,
    "max_attempts": 1,
    "ack_failures": True,
    "save_limit": env_int("Q_SAVE_LIMIT", 250),
    "catch_up": False,
    # With the database as the broker (the embedded default), an idle worker looks for a task
    # every poll: the wait is most of a one-page upload's time to ready at 0.2 s (bench/README.md,
    # "One-page probe"); 0.05 s costs an idle cluster about 5 % of a core more. Redis wakes
    # workers at once.
    "poll": env_float("Q_POLL", 0.05),
    "bulk": env_int("Q_BULK", 1),
    "label": "Task queue",
    # Webhook deliveries have a queue and a cluster of their own (run_platform starts one qcluster
    # per entry here, with Q_CLUSTER_NAME set to its name): an endpoint, however slow, never holds
    # a worker that runs stages. Each attempt ends within WEBHOOK_TIMEOUT, far inside "timeout".
    "ALT_CLUSTERS": {
        WEBHOOK_QUEUE: {
            "workers": env_int("WEBHOOK_WORKERS", 2),
            "poll": env_float("WEBHOOK_POLL", 0.2),  # a delivery may wait; an upload's user waits
            "timeout": 120,
            "retry": 180,
            "recycle": 500,
        },
    },
}
if os.environ.get("Q_BROKER", "orm") == "redis":
    Q_CLUSTER["redis"] = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
else:
    Q_CLUSTER["orm"] = "default"
if env_bool("Q_SYNC"):
    Q_CLUSTER["sync"] = True

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {"client_errors_as_info": {"()": "config.logs.ClientErrorsAsInfo"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        # A 4xx is the client's mistake: INFO, shown only with REQUEST_LOG_LEVEL=INFO.
        "django.request": {
            "level": os.environ.get("REQUEST_LOG_LEVEL", "WARNING"),
            "filters": ["client_errors_as_info"],
        },
        "django.db.backends": {"level": "WARNING"},
        "django-q": {"level": os.environ.get("Q_LOG_LEVEL", "WARNING")},
        "fontTools": {"level": "WARNING"},
        # Object storage: their debug lines show every request's signing; nothing of it is needed.
        "botocore": {"level": "WARNING"},
        "boto3": {"level": "WARNING"},
        "s3transfer": {"level": "WARNING"},
    },
}

# --- Lifecycle (delete, webhooks) -------------------------------------------------------------
# check_jobs reports rows or files of a deleted document left longer than this after the delete
# (its cleanup normally finishes within a reaper pass).
DOCUMENTS_DELETE_AUDIT_GRACE = env_float("DOCUMENTS_DELETE_AUDIT_GRACE", 300)
# Stored bytes of cancelled, failed and superseded versions are kept this many days (for "process
# again" and retries), then the reaper removes them; 0 removes them at its next pass.
DOCUMENTS_STORAGE_RETENTION_DAYS = env_float("DOCUMENTS_STORAGE_RETENTION_DAYS", 7)
# Bytes a tenant may keep stored (versions not yet freed and /v1 file objects); a tenant's own
# ``max_storage_bytes`` overrides it; 0 means no limit.
DOCUMENTS_TENANT_MAX_STORAGE_BYTES = env_int("DOCUMENTS_TENANT_MAX_STORAGE_BYTES", 10 * 1024**3)
# Webhooks: targets in private, loopback, link-local or other non-public networks are refused
# unless this is set (checked again at every send: DNS may change).
WEBHOOK_ALLOW_PRIVATE = env_bool("WEBHOOK_ALLOW_PRIVATE")
# Seconds one delivery attempt may take in all (resolving, connecting, TLS, sending, the answer's
# headers): an endpoint answering a byte at a time is cut off at this deadline too.
WEBHOOK_TIMEOUT = env_float("WEBHOOK_TIMEOUT", 5)
# Seconds resolving a webhook URL's host may take, at registration and at each send.
WEBHOOK_RESOLVE_TIMEOUT = env_float("WEBHOOK_RESOLVE_TIMEOUT", 3)
# Seconds between attempts after the first (8 attempts over about 27 hours); the endpoint is
# disabled with a notice when a message runs out of them.
WEBHOOK_RETRY_SCHEDULE = env_floats("WEBHOOK_RETRY_SCHEDULE", "5,300,1800,7200,18000,36000,36000")
# Deliveries sending at once, across every delivery worker of every machine.
WEBHOOK_MAX_CONCURRENCY = env_int("WEBHOOK_MAX_CONCURRENCY", 2)

# --- Re-index (documents/kinds/reindex.py) ------------------------------------------------------------
# After a re-index switches a tenant, its old vectors stay this long (searches that read the
# active embedder just before the switch still rank with them), then the reaper removes them.
REINDEX_RETIRE_GRACE_SECONDS = env_float("REINDEX_RETIRE_GRACE_SECONDS", 60)
