from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    name = "documents"
    verbose_name = "Documents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from documents import pipeline
        from documents.services.quotas import tenant_quota
        from jobs.quotas import register_provider

        pipeline.register()
        register_provider(tenant_quota)
