"""The operator console in Simplified Chinese: the admin index names the apps and models in the
reader's language, and the health page's headings, tiles and notes follow (the figures, the
causes' codes and the statuses' values stay as they are)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from jobs.services.worker import job_claim
from tests.jobs.helpers import new_job
from tests.ops.conftest import login
from tests.ops.helpers import fail, tenant

pytestmark = pytest.mark.django_db
CHINESE = {"Accept-Language": "zh-hans"}


@pytest.fixture
def admin() -> Client:
    return login(User.objects.create_superuser(username="root", password="pw"))


def test_the_admin_index_names_apps_and_models_in_chinese(admin: Client):
    page = admin.get("/admin/", headers=CHINESE).content.decode()
    for name in ("任务", "停滞的任务", "文档", "文档集", "文档版本", "租户", "删除记录", "Webhook 端点"):
        assert f">{name}</a>" in page, name
    assert "任务健康状况" in page and "等待运维人员决定的任务" in page
    for english in (">Stalled jobs<", ">Collections<", ">Tenants<", ">Document versions<", "Job health"):
        assert english not in page, english
    assert ">Stalled jobs</a>" in admin.get("/admin/").content.decode()  # English readers unchanged


def test_the_health_page_is_in_chinese(admin: Client):
    tenant("acme")
    claim = job_claim(job_id=new_job(tenant="acme").pk, worker="host-a:1")
    assert claim is not None
    fail(claim, "corrupt_input")
    page = admin.get("/admin/jobs/job/health/", headers=CHINESE).content.decode()
    for expected in (
        "<h1>任务健康状况</h1>",
        "失败，24 小时",  # noqa: RUF001 (Chinese punctuation)
        "最近 24 小时内进入（最近 1 小时 1 个）",  # noqa: RUF001
        "按原因统计的失败和重试",
        "corrupt_input",  # a cause's code stays a code
        "永久性，仅限运维人员",  # noqa: RUF001
        "<th>工作进程</th><th>最近心跳</th>",
        "失败率，1 小时",  # noqa: RUF001
        "100.0%（1 次中 1 次）",  # noqa: RUF001
    ):
        assert expected in page, expected
    for english in ("Job health", "Failures and retries by cause", "entered in the last 24 h", "As of "):
        assert english not in page, english


def test_the_job_lists_link_each_other_and_the_health_page_in_chinese(admin: Client):
    jobs = admin.get("/admin/jobs/job/", headers=CHINESE).content.decode()
    assert ">健康状况</a>" in jobs and ">停滞的任务</a>" in jobs
    stalled = admin.get("/admin/jobs/stalledjob/", headers=CHINESE).content.decode()
    assert ">全部任务</a>" in stalled and ">All jobs<" not in stalled
