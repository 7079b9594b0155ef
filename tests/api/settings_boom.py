"""Test settings whose URLs include failing views, for a real server's 500 answers."""

from tests.settings import *  # noqa: F403

ROOT_URLCONF = "tests.api.urls_boom"
