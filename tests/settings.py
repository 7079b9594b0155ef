"""Test settings: the platform's own, plus a test app that registers a toy pipeline."""

import os

# Tests and the servers they start share one key of their own (config.settings refuses to start
# without a key unless DEBUG).
os.environ.setdefault("SECRET_KEY", "tests-only-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH")

from config.settings import *  # noqa: F403
from config.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# --- embedder for the suite -------------------------------------------------------------------
# The pipeline and search tests use the lexical hashing embedder: no model to load, thousands of
# chunks a second where the default model (EMBEDDINGS_BACKEND=local) embeds a few. That model is
# tested on its own in tests/documents/test_embedding_model.py and against the search floors in
# tests/documents/test_relevance_modes.py; EMBEDDINGS_BACKEND=local in the environment runs the
# whole suite with it.
EMBEDDINGS_BACKEND = os.environ.get("EMBEDDINGS_BACKEND", "hashing")
# Throttles and lockouts stay on (their counters live in the shared database cache), with limits
# no functional test reaches; tests/api/test_throttles.py sets its own.
REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {
        scope: os.environ.get(f"THROTTLE_{scope.upper()}", "100000/min")
        for scope in (
            "upload_user",
            "upload_ip",
            "search_user",
            "search_ip",
            "write_user",
            "write_ip",
            "webhook_user",
        )
    },
}
AUTH_FAILURE_LIMIT_PER_ADDRESS = env_int("AUTH_FAILURE_LIMIT_PER_ADDRESS", 100_000)  # noqa: F405
# Tests change users and tokens with QuerySet.update (no signal) and expect the next request to
# see it: no token memory here; tests/api/test_token_cache.py turns it on for its own cases.
API_TOKEN_CACHE_SECONDS = env_int("API_TOKEN_CACHE_SECONDS", 0)  # noqa: F405
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 100_000)  # noqa: F405
SSE_MAX_STREAMS_PER_USER = env_int("SSE_MAX_STREAMS_PER_USER", 100_000)  # noqa: F405
SSE_MAX_STREAMS = env_int("SSE_MAX_STREAMS", 100_000)  # noqa: F405
# Under pytest-xdist (`make test-fast`) every worker process has a database of its own (named by
# its pid, config/settings.py) and here a media folder of its own, so that no test sees or removes
# files another worker wrote. Child processes get the folder through MEDIA_ROOT (tests/conftest.py).
if os.environ.get("PYTEST_XDIST_WORKER") and "MEDIA_ROOT" not in os.environ:
    MEDIA_ROOT = VAR_DIR / f"media-{os.environ['PYTEST_XDIST_WORKER']}"  # noqa: F405
