"""A tenant whose searchable text is largely Chinese, Japanese or Korean while its embedder reads
none of those scripts (the English default) is named by ``manage.py check`` and the admin's health
page, with the multilingual embedder to re-index onto; a tenant on an embedder that reads them, or
whose text is English, is not. The content is sampled from each tenant's latest documents, in a
fixed number of queries whatever the number of tenants."""

from __future__ import annotations

import pytest

from documents.checks import SAMPLE_DOCUMENTS, cjk_tenants, unbuildable_embedders
from documents.embedders import embedder_for
from documents.search import SearchUnavailable, search
from tests.documents.helpers import bulk_published, make_tenant
from tests.ops.conftest import check_output, health_page

pytestmark = pytest.mark.django_db

ENGLISH_ONLY = embedder_for("local").name  # the default model: no weights are loaded for its name
MULTILINGUAL = embedder_for("e5").name


def chinese(n: int, o: int) -> str:
    return f"第{n}份报告的第{o}段 港口的船只、天气和值班人员的记录 以及打印机的纸张大小设置。"


def english(n: int, o: int) -> str:
    return f"Paragraph {o} of report {n}: the harbour's boats, the weather and the staff on duty."


def test_chinese_content_on_the_english_model_is_flagged_with_the_embedder_to_move_to():
    bulk_published(make_tenant("zh-tenant", active_embedder=ENGLISH_ONLY), 3, 4, chinese)
    bulk_published(make_tenant("en-tenant", active_embedder=ENGLISH_ONLY), 3, 4, english)
    bulk_published(make_tenant("e5-tenant", active_embedder=MULTILINGUAL), 3, 4, chinese)
    make_tenant("empty-tenant", active_embedder=ENGLISH_ONLY)  # nothing searchable: not judged

    assert cjk_tenants() == [("zh-tenant", ENGLISH_ONLY, 1.0)]
    found = check_output()
    assert "documents.W002" in found and "'zh-tenant'" in found and '"embedder": "e5"' in found
    assert "en-tenant" not in found and "e5-tenant" not in found and "empty-tenant" not in found
    page = health_page()
    assert (
        "jobs-config-warning" in page and "zh-tenant" in page and "Choosing the multilingual embedder" in page
    )
    assert "en-tenant" not in page and "e5-tenant" not in page


def test_the_sample_is_the_latest_documents_and_a_minority_of_cjk_text_is_not_flagged():
    # Old Chinese documents, then SAMPLE_DOCUMENTS English ones: the tenant now writes English.
    moved = make_tenant("moved", active_embedder=ENGLISH_ONLY)
    bulk_published(moved, 10, 3, chinese)
    bulk_published(moved, SAMPLE_DOCUMENTS, 3, english)
    # The other way round: its latest documents are Chinese.
    turned = make_tenant("turned", active_embedder=ENGLISH_ONLY)
    bulk_published(turned, 10, 3, english)
    bulk_published(turned, SAMPLE_DOCUMENTS, 3, chinese)
    # One sampled entry of 15 is Chinese (a glossary page among manuals): under the tenant's share.
    mixed = make_tenant("mixed", active_embedder=ENGLISH_ONLY)
    bulk_published(mixed, 5, 10, lambda n, o: chinese(n, o) if n == o == 0 else english(n, o))
    # A third of the entries: over it.
    third = make_tenant("third", active_embedder=ENGLISH_ONLY)
    bulk_published(third, 4, 3, lambda n, o: chinese(n, o) if o == 0 else english(n, o))

    assert cjk_tenants() == [("turned", ENGLISH_ONLY, 1.0), ("third", ENGLISH_ONLY, pytest.approx(1 / 3))]


def test_the_check_costs_the_same_few_queries_for_many_tenants(django_assert_max_num_queries):
    for i in range(12):
        bulk_published(
            make_tenant(f"t{i}", active_embedder=ENGLISH_ONLY), 2, 2, chinese if i % 2 else english
        )
    with django_assert_max_num_queries(2):  # the tenants; their latest documents' first entries
        found = cjk_tenants()
    assert sorted(slug for slug, _, _ in found) == sorted(f"t{i}" for i in range(1, 12, 2))[:5]


def test_a_tenant_whose_embedder_cannot_be_built_here_is_named_and_its_full_text_still_answers():
    # A model taken out of the installation (or settings it needs gone): the tenant is named with
    # what to do before its uploads fail, and its full text keeps answering; meaning cannot.
    gone = make_tenant("gone-tenant", active_embedder="retired-model-v1")
    bulk_published(gone, 2, 2, english)
    make_tenant("moving-tenant", active_embedder=ENGLISH_ONLY, target_embedder="retired-model-v2")
    make_tenant("fine-tenant", active_embedder=MULTILINGUAL)

    assert unbuildable_embedders() == [
        ("gone-tenant", "retired-model-v1"),
        ("moving-tenant", "retired-model-v2"),
    ]
    found = check_output()
    assert found.count("documents.W003") == 2 and "'gone-tenant'" in found and "re-index the tenant" in found
    assert "fine-tenant" not in found
    page = health_page()
    assert "jobs-config-warning" in page and "retired-model-v1" in page

    assert {h.document_title for h in search(gone, "harbour boats weather", k=5, mode="lexical")} == {
        "log 0",
        "log 1",
    }
    assert {h.document_title for h in search(gone, "harbour boats weather", k=5, mode="hybrid")} == {
        "log 0",
        "log 1",
    }
    with pytest.raises(SearchUnavailable):
        search(gone, "harbour boats weather", k=5, mode="semantic")
