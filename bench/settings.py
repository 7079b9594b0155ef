"""Settings for the HTTP benchmarks: the platform's own, plus a bench-only urlconf that adds a
trivial endpoint beside the real API (bench/urls.py). Nothing else differs."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
