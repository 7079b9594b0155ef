"""The Content-Security-Policy header from ``CONTENT_SECURITY_POLICY`` (Django 5.2 has none)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.deprecation import MiddlewareMixin


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """Adds ``Content-Security-Policy`` to responses that do not set their own. A MiddlewareMixin,
    so it runs sync or async as the request does (a sync-only middleware would push the async
    event streams through a thread)."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        policy = settings.CONTENT_SECURITY_POLICY
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response
