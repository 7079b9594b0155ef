"""Where stored files live, from the environment: the local folder by default, an S3-compatible
bucket with ``STORAGE_BACKEND=s3`` (refused when incomplete), and a real SeaweedFS that refuses
requests not signed with its keys, as S3 does."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from botocore.exceptions import ClientError
from django.core.exceptions import ImproperlyConfigured

from config.object_storage import S3_BACKEND, storages_from_env
from tests.conftest import ROOT

S3_ENV = {
    "STORAGE_BACKEND": "s3",
    "STORAGE_S3_BUCKET": "media",
    "STORAGE_S3_ENDPOINT_URL": "http://127.0.0.1:8333",
    "STORAGE_S3_REGION": "eu-west-1",
    "STORAGE_S3_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "STORAGE_S3_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-example-secret",
    "STORAGE_S3_ADDRESSING_STYLE": "path",
    "STORAGE_S3_PREFIX": "/platform/",
}


def test_the_default_is_the_local_folder_under_media_root() -> None:
    default = storages_from_env({})["default"]

    assert default == {"BACKEND": "django.core.files.storage.FileSystemStorage"}


def test_s3_settings_come_from_the_environment() -> None:
    default = storages_from_env(S3_ENV)["default"]

    assert default["BACKEND"] == S3_BACKEND
    options = default["OPTIONS"]
    assert options["bucket_name"] == "media" and options["location"] == "platform"
    assert options["endpoint_url"] == "http://127.0.0.1:8333" and options["region_name"] == "eu-west-1"
    assert options["addressing_style"] == "path"
    assert (options["access_key"], options["secret_key"]) == ("AKIDEXAMPLE", "wJalrXUtnFEMI-example-secret")
    assert options["file_overwrite"] is False  # a stored name is never replaced, as on disk
    assert options["max_memory_size"] > 0  # a large file read back spills to disk


def test_without_keys_boto3_finds_its_own_credentials() -> None:
    env = {k: v for k, v in S3_ENV.items() if "KEY" not in k}

    assert "access_key" not in storages_from_env(env)["default"]["OPTIONS"]


@pytest.mark.parametrize(
    "change",
    [
        {"STORAGE_BACKEND": "ftp"},
        {"STORAGE_S3_BUCKET": ""},
        {"STORAGE_S3_ADDRESSING_STYLE": "sideways"},
        {"STORAGE_S3_SECRET_ACCESS_KEY": ""},
    ],
)
def test_an_incomplete_s3_configuration_refuses_to_start(change: dict[str, str]) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        storages_from_env({**S3_ENV, **change})

    assert S3_ENV["STORAGE_S3_SECRET_ACCESS_KEY"] not in str(refused.value)


@pytest.mark.slow
def test_a_process_started_with_the_s3_variables_stores_through_the_bucket() -> None:
    env = {"DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT), **S3_ENV}
    code = (
        "import django; django.setup();"
        "from django.core.files.storage import default_storage as s;"
        "bucket = s.bucket_name; print(type(s._wrapped).__name__, bucket)"
    )
    used = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )

    assert used.returncode == 0, used.stderr
    assert used.stdout.split() == ["S3Storage", "media"]


def test_error_reports_hide_the_storage_keys(settings: Any) -> None:
    from django.views.debug import SafeExceptionReporterFilter

    settings.STORAGES = storages_from_env(S3_ENV)

    shown = repr(SafeExceptionReporterFilter().get_safe_settings()["STORAGES"])

    assert "media" in shown
    assert (
        S3_ENV["STORAGE_S3_SECRET_ACCESS_KEY"] not in shown
        and S3_ENV["STORAGE_S3_ACCESS_KEY_ID"] not in shown
    )


@pytest.mark.slow
def test_seaweedfs_refuses_a_request_signed_with_the_wrong_key(seaweed: Any, s3_bucket: str) -> None:
    seaweed.client().put_object(Bucket=s3_bucket, Key="a", Body=b"x")

    with pytest.raises(ClientError) as refused:
        seaweed.client(secret_key="not-the-key").get_object(Bucket=s3_bucket, Key="a")

    assert refused.value.response["Error"]["Code"] in {"SignatureDoesNotMatch", "AccessDenied"}


def test_requests_to_the_bucket_wait_and_retry_a_bounded_time() -> None:
    config = storages_from_env(S3_ENV)["default"]["OPTIONS"]["client_config"]
    assert (config.connect_timeout, config.read_timeout) == (10.0, 10.0)
    assert config.retries == {"max_attempts": 3, "mode": "standard"}

    tuned = storages_from_env({**S3_ENV, "STORAGE_S3_TIMEOUT": "2.5", "STORAGE_S3_ATTEMPTS": "1"})
    config = tuned["default"]["OPTIONS"]["client_config"]
    assert (config.connect_timeout, config.retries["max_attempts"]) == (2.5, 1)
    for bad in ({"STORAGE_S3_TIMEOUT": "soon"}, {"STORAGE_S3_TIMEOUT": "0"}, {"STORAGE_S3_ATTEMPTS": "99"}):
        with pytest.raises(ImproperlyConfigured):
            storages_from_env({**S3_ENV, **bad})


def _storage_errors() -> list[Any]:
    from django.core.checks import run_checks

    return [m for m in run_checks(include_deployment_checks=True) if m.id == "documents.E020"]


@pytest.mark.slow
def test_check_deploy_asks_the_bucket(seaweed: Any, s3_bucket: str, settings: Any) -> None:
    env = seaweed.env(s3_bucket)
    settings.STORAGES = storages_from_env(env)
    assert _storage_errors() == []

    settings.STORAGES = storages_from_env({**env, "STORAGE_S3_BUCKET": "no-such-bucket-here"})
    [missing] = _storage_errors()
    assert "no-such-bucket-here" in missing.msg

    settings.STORAGES = storages_from_env({**env, "STORAGE_S3_SECRET_ACCESS_KEY": "not-the-key"})
    [refused] = _storage_errors()
    assert "not-the-key" not in refused.msg and env["STORAGE_S3_ACCESS_KEY_ID"] not in refused.msg

    closed = {**env, "STORAGE_S3_ENDPOINT_URL": "http://127.0.0.1:9", "STORAGE_S3_TIMEOUT": "2"}
    settings.STORAGES = storages_from_env({**closed, "STORAGE_S3_ATTEMPTS": "1"})
    [unreachable] = _storage_errors()
    assert "cannot be reached" in unreachable.msg
