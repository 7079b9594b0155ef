from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    name = "documents"
    verbose_name = "Documents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import documents.checks  # noqa: F401  (registers the system checks)
        from documents import pipeline
        from documents.engines.ocr import tesseract_leftover_age
        from documents.services.quotas import tenant_quota
        from jobs.quotas import register_provider
        from jobs.scratch import register_leftover

        pipeline.register()
        register_provider(tenant_quota)
        # pytesseract's temp files (image in, text out) of a worker killed mid-page.
        register_leftover("tess_*", tesseract_leftover_age)
