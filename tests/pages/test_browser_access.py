"""Access lists in a real browser (Debian's Chromium via Playwright) against a real web server on
this test's database: a member who is not on a document's list finds it on no page (the list and
its filter, every search mode the page offers, the collections and their counts, the document,
its chunks and its text), a member of the group on the list finds it everywhere; an operator
adds the first member to the group in the admin, and the document appears for them on every
page at once, with nothing processed again."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections

from documents.models import Chunk, Document, DocumentGrant, IndexEntry
from documents.selectors import viewer_for
from documents.services.access import document_access_set
from documents.services.groups import group_create, group_member_add, membership_set_admin
from jobs.models import Job, Status
from tests.conftest import Processes
from tests.documents.helpers import run_until_idle
from tests.pages.browser import (
    DESKTOP,
    Platform,
    free_port,
    log_in,
    screenshot,
    server_env,
)
from tests.pages.helpers import PASSWORD, Member, make_member

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUERY = "cobalt harbor fishing boats"
SHOWN = "Harbor almanac"
HIDDEN = "Payroll ledger"


@pytest.fixture(scope="module")
def platform(django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any) -> Iterator[Platform]:
    """The web server alone: the documents are processed in this process, so no worker may claim
    them first, and none could process anything again unseen."""
    processes = Processes(tmp_path_factory.mktemp("platform"))
    with django_db_blocker.unblock():
        env = server_env(str(settings.MEDIA_ROOT))
    try:
        platform = Platform(processes, env, free_port())
        platform.start_web()
        yield platform
    finally:
        processes.stop_all()
        with django_db_blocker.unblock():
            connections.close_all()


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def browser_page(chromium: Any, platform: Platform, username: str) -> Any:
    context = chromium.new_context(viewport=DESKTOP, locale="en-US")
    context.set_default_timeout(15_000)
    page = context.new_page()
    log_in(page, platform, username)
    return page


def ready_text(member: Member, title: str, text: str) -> Document:
    result = member.upload(text.encode(), f"{title.lower().replace(' ', '-')}.txt", title)
    assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
    return Document.objects.get(pk=result.document.pk)


def chunk_count(document: Document) -> int:
    return Chunk.objects.filter(version_id=document.published_version_id).count()


def no_trace(page: Any, hidden: Document) -> None:
    """Nothing of the hidden document in the page's HTML: its title, its id."""
    body = page.content()
    assert HIDDEN not in body, page.url
    assert str(hidden.pk) not in body and hidden.pk.hex not in body, page.url


def titles(page: Any, selector: str) -> list[str]:
    return sorted(page.locator(selector).all_inner_texts())


def check_pages(page: Any, platform: Platform, hidden: Document, *, sees: bool, shown_chunks: int) -> None:
    """Every page that lists, counts, finds or shows documents, as ``page``'s user sees it."""
    both = sees
    expected_titles = sorted([SHOWN, HIDDEN]) if both else [SHOWN]
    hidden_chunks = chunk_count(hidden)
    chunks = shown_chunks + (hidden_chunks if both else 0)
    documents = 2 if both else 1

    # The documents list, its rows, and its title filter.
    page.goto(f"{platform.url}/")
    expect(page.locator("table.documents tbody tr")).to_have_count(documents)
    assert titles(page, "table.documents tbody th a") == expected_titles
    if not both:
        no_trace(page, hidden)
    page.get_by_label("Title contains").fill("Payroll")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r"q=Payroll"))
    if both:
        expect(page.locator("table.documents tbody tr")).to_have_count(1)
    else:
        expect(page.locator("p.empty")).to_have_text("No document matches these filters.")
        no_trace(page, hidden)

    # Search, in every mode the page offers (read from the page itself).
    page.goto(f"{platform.url}/search")
    modes = page.locator("#search-mode option").evaluate_all("options => options.map(o => o.value)")
    assert set(modes) >= {"hybrid", "lexical", "semantic"}, modes
    for mode in modes:
        page.goto(f"{platform.url}/search")
        page.locator("#search-mode").select_option(mode)
        page.get_by_label("Search your documents").fill(QUERY)
        page.get_by_role("button", name="Search", exact=True).click()
        page.wait_for_url(re.compile(rf"mode={mode}"))
        found = sorted(set(page.locator(".result h3").all_inner_texts()))
        assert found == expected_titles, (mode, found)
        count = int(page.locator(".results-count").inner_text().split()[0])
        assert count == page.locator(".result").count(), mode
        if not both:
            no_trace(page, hidden)

    # The collections and their counts, then the collection's own page.
    page.goto(f"{platform.url}/collections/")
    row = page.locator("tr[data-collection]")
    expect(row).to_have_count(1)
    cells = row.locator("td").all_inner_texts()
    assert cells == [str(documents), str(documents), "0", "0", str(chunks)], cells
    row.locator("th a").click()
    page.wait_for_url("**/collections/*/")
    expect(page.locator('[data-field="counts"]')).to_have_text(
        f"{documents} documents: {documents} ready, 0 queued, 0 in progress, 0 failed, 0 cancelled; "
        f"{chunks} searchable chunks."
    )
    assert titles(page, "table.documents tbody th a") == expected_titles
    if not both:
        no_trace(page, hidden)


def hidden_links(page: Any, platform: Platform, hidden: Document) -> list[str]:
    """The document page's own links to its chunks and its text, as its reader finds them."""
    response = page.goto(f"{platform.url}/documents/{hidden.pk}/")
    assert response.status == 200
    links = [
        page.get_by_role("link", name="Chunks").get_attribute("href"),
        page.get_by_role("link", name="Extracted text").get_attribute("href"),
    ]
    return [f"{platform.url}{link}" for link in links]


def unmasked(body: bytes) -> bytes:
    """The body with its CSRF tokens blanked: each answer masks the token anew."""
    return re.sub(rb'name="csrfmiddlewaretoken" value="[^"]+"', b'name="csrfmiddlewaretoken" value=""', body)


def check_document(page: Any, platform: Platform, hidden: Document, links: list[str], *, sees: bool) -> None:
    """The document's page, its chunks page and its text: 200, or exactly what a missing id gets."""
    missing = uuid.uuid4()
    for url in [f"{platform.url}/documents/{hidden.pk}/", *links]:
        response = page.request.get(url)
        if sees:
            assert response.status == 200, url
            continue
        absent = page.request.get(url.replace(str(hidden.pk), str(missing)))
        assert response.status == absent.status == 404, url
        assert unmasked(response.body()) == unmasked(absent.body()).replace(
            str(missing).encode(), str(hidden.pk).encode()
        ), url
        assert HIDDEN.encode() not in response.body(), url
    if not sees:  # and as a page the browser shows
        response = page.goto(f"{platform.url}/documents/{hidden.pk}/")
        assert response.status == 404
        assert HIDDEN not in page.content()  # the id is in it: the address the user typed


def add_to_group_in_admin(chromium: Any, platform: Platform, group_id: int, users: list[Any]) -> None:
    """An operator sets the group's members on its admin page, as anyone running the platform would."""
    get_user_model().objects.create_superuser("operator", "operator@example.com", PASSWORD)
    context = chromium.new_context(viewport=DESKTOP, locale="en-US")
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto(f"{platform.url}/admin/login/")
    page.locator("#id_username").fill("operator")
    page.locator("#id_password").fill(PASSWORD)
    page.locator("input[type=submit]").click()
    page.wait_for_url(f"{platform.url}/admin/")
    page.goto(f"{platform.url}/admin/documents/workspacegroup/{group_id}/change/")
    page.locator("#id_members").select_option([str(user.pk) for user in users])
    page.locator("input[name=_save]").click()
    page.wait_for_url(f"{platform.url}/admin/documents/workspacegroup/")
    expect(page.locator(".messagelist")).to_contain_text("changed successfully")
    context.close()


def test_a_restricted_document_is_on_no_page_until_its_group_takes_the_member_in(
    chromium: Any, platform: Platform, alice: Member
):
    carol = make_member("carol", "acme")  # not on the list
    dave = make_member("dave", "acme")  # in the group on the list
    shown = ready_text(alice, SHOWN, "Cobalt harbor wakes before the fishing boats. The tide table for May.")
    hidden = ready_text(
        alice, HIDDEN, "Cobalt harbor fishing boats: the crew's salaries and bonuses for May."
    )
    membership_set_admin(membership=alice.user.memberships.get(), is_admin=True)
    admin_viewer = viewer_for(alice.user, alice.tenant)
    payroll = group_create(viewer=admin_viewer, tenant=alice.tenant, name="Payroll")
    group_member_add(viewer=admin_viewer, group=payroll, user_id=dave.user.pk)
    document_access_set(
        viewer=admin_viewer,
        document=hidden,
        inherit=False,
        principals=[f"group:{payroll.pk}"],
        user=alice.user,
    )
    shown_chunks = chunk_count(shown)
    assert shown_chunks and chunk_count(hidden)

    dave_page = browser_page(chromium, platform, dave.username)
    check_pages(dave_page, platform, hidden, sees=True, shown_chunks=shown_chunks)
    links = hidden_links(dave_page, platform, hidden)
    check_document(dave_page, platform, hidden, links, sees=True)
    screenshot(dave_page, "access-group-member-document")

    carol_page = browser_page(chromium, platform, carol.username)
    check_pages(carol_page, platform, hidden, sees=False, shown_chunks=shown_chunks)
    check_document(carol_page, platform, hidden, links, sees=False)

    # Carol joins the group; nothing about the document is written or processed again.
    before = (
        sorted(Job.objects.values_list("pk", "version")),
        sorted(IndexEntry.objects.values_list("pk", flat=True)),
        sorted(DocumentGrant.objects.filter(document=hidden).values_list("principal", flat=True)),
        Document.objects.get(pk=hidden.pk).published_version_id,
    )
    add_to_group_in_admin(chromium, platform, payroll.pk, [dave.user, carol.user])
    after = (
        sorted(Job.objects.values_list("pk", "version")),
        sorted(IndexEntry.objects.values_list("pk", flat=True)),
        sorted(DocumentGrant.objects.filter(document=hidden).values_list("principal", flat=True)),
        Document.objects.get(pk=hidden.pk).published_version_id,
    )
    assert after == before

    check_pages(carol_page, platform, hidden, sees=True, shown_chunks=shown_chunks)
    check_document(carol_page, platform, hidden, links, sees=True)
    screenshot(carol_page, "access-after-joining-the-group")
    carol_page.context.close()
    dave_page.context.close()
