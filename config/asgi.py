import os

from django.conf import settings
from django.core.asgi import get_asgi_application

from config.body_limit import BodyLimitMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = BodyLimitMiddleware(get_asgi_application(), max_bytes=int(settings.REQUEST_MAX_BODY_BYTES))
