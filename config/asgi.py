import os

from django.conf import settings
from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application

from config.body_limit import BodyLimitMiddleware
from config.dispatch import ViewKindDispatcher

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Sync views (the API, the pages) run on Django's WSGI handler in a thread pool, async views (the
# event stream) on its ASGI handler: one server and one origin for both (config/dispatch.py).
_views = ViewKindDispatcher(
    asgi_app=get_asgi_application(),
    wsgi_app=get_wsgi_application(),
    threads=settings.WEB_THREADS,
)
application = BodyLimitMiddleware(_views, max_bytes=settings.REQUEST_MAX_BODY_BYTES)
