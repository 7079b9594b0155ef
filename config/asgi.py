import os

from django.conf import settings
from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application
from granian.utils.proxies import wrap_asgi_with_proxy_headers

from config.body_limit import BodyLimitMiddleware
from config.dispatch import ViewKindDispatcher
from config.edge import EdgeDeadlines, trusted_proxies

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Sync views (the API, the pages) run on Django's WSGI handler in a thread pool, async views (the
# event stream) on its ASGI handler: one server and one origin for both (config/dispatch.py).
_views = ViewKindDispatcher(
    asgi_app=get_asgi_application(),
    wsgi_app=get_wsgi_application(),
    threads=settings.WEB_THREADS,
)
application = EdgeDeadlines(
    BodyLimitMiddleware(_views, max_bytes=settings.REQUEST_MAX_BODY_BYTES),
    body_idle_seconds=settings.WEB_BODY_IDLE_SECONDS,
    body_seconds=settings.WEB_BODY_SECONDS,
    send_seconds=settings.WEB_SEND_SECONDS,
)
if trusted_proxies():
    application = wrap_asgi_with_proxy_headers(application, trusted_hosts=trusted_proxies())
