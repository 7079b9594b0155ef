from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    name = "documents"
    verbose_name = "Documents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from documents import pipeline

        pipeline.register()
