from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class DocumentsConfig(AppConfig):
    name = "documents"
    verbose_name = _("Documents")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import documents.checks  # noqa: F401  (registers the system checks)
        from documents.audit import LEFTOVERS
        from documents.kinds import evaluate, ingest, reindex, sync
        from documents.services.delete import deletions_sweep
        from documents.services.process_again import PROCESS_AGAIN
        from documents.services.quotas import tenant_quota
        from documents.stages.ocr import tesseract_leftover_age
        from documents.webhooks.delivery import webhook_messages_sweep
        from jobs.audit import register_check
        from jobs.quotas import register_provider
        from jobs.rules import register_action
        from jobs.scratch import register_leftover
        from jobs.services.reaper import register_sweep

        ingest.register()
        reindex.register()  # the second job kind: re-index a tenant with another embedder
        evaluate.register()  # the third: a labelled query set run through search and scored
        sync.register()  # the fourth: a source's items made documents, versions and deletes
        from documents.retrieval.index import install

        install(self)  # search: sqlite-vec in every SQLite connection, the full-text index whole
        register_provider(tenant_quota)
        # "Process again" (a cancelled or failed version's bytes, a new version and job) is
        # answered by the engine's one action table like every other action.
        register_action(PROCESS_AGAIN)
        # pytesseract's temp files (image in, text out) of a worker killed mid-page.
        register_leftover("tess_*", tesseract_leftover_age)
        from documents.sandbox.runner import TEMP_PREFIX, temp_leftover_age

        register_leftover(f"{TEMP_PREFIX}*", temp_leftover_age)  # a sandbox child's, mid-call
        # Lifecycle: the reaper finishes deletes whose cleanup died; check_jobs audits leftovers.
        register_sweep("documents.deletions", deletions_sweep)
        register_check(LEFTOVERS)
        register_sweep("documents.webhooks", webhook_messages_sweep)
        # /v1: vector stores past their expires_after are deleted by the reaper.
        from documents.services.vector_stores import stores_expire_sweep

        register_sweep("documents.vector_store_expiry", stores_expire_sweep)

        from documents.services.reindex import retired_vectors_sweep

        register_sweep("documents.reindex_retired", retired_vectors_sweep)
        # Stored bytes of cancelled, failed and superseded versions once their retention passed.
        from documents.services.storage import stored_bytes_sweep

        register_sweep("documents.stored_bytes", stored_bytes_sweep)
