"""``GET /metrics`` for Prometheus, behind a bearer token and/or an address allow-list.

Settings (from the environment): ``METRICS_TOKEN`` (scrapers send ``Authorization: Bearer
<token>``) and ``METRICS_ALLOWED_IPS`` (addresses or networks, comma-separated). With neither
set, the endpoint is closed: figures about tenants and failures are not for the open internet.
Refusals use the API's error shape ``{"error": {"code", "message"}}``: a missing token is 401, a
wrong token or an address outside the list is 403.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger(__name__)


def _error(status: int, code: str, message: str) -> JsonResponse:
    response = JsonResponse({"error": {"code": code, "message": message}}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def _address_allowed(address: str, allowed: list[str]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for entry in allowed:
        try:
            if ip in ipaddress.ip_network(entry.strip(), strict=False):
                return True
        except ValueError:
            log.warning("METRICS_ALLOWED_IPS has an entry that is not an address or network: %r", entry)
    return False


def refusal(request: HttpRequest) -> JsonResponse | None:
    """Why this request may not read the metrics, or ``None`` when it may."""
    token: str = settings.METRICS_TOKEN
    allowed: list[str] = settings.METRICS_ALLOWED_IPS
    if not token and not allowed:
        return _error(
            403, "metrics_disabled", "Metrics are not enabled: set METRICS_TOKEN or METRICS_ALLOWED_IPS."
        )
    # REMOTE_ADDR, not X-Forwarded-For: a header the client writes cannot open the list.
    if allowed and not _address_allowed(request.META.get("REMOTE_ADDR", ""), allowed):
        return _error(403, "forbidden_address", "This address may not read the metrics.")
    if token:
        scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not sent.strip():
            return _error(
                401, "not_authenticated", "Send the metrics token as 'Authorization: Bearer <token>'."
            )
        if not hmac.compare_digest(sent.strip().encode(), token.encode()):
            return _error(403, "invalid_token", "The metrics token is not valid.")
    return None


def metrics(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        return _error(405, "method_not_allowed", "Only GET is allowed here.")
    refused = refusal(request)
    if refused is not None:
        return refused
    # Imported here, not at the top: config/urls.py imports this module, and a deployment that
    # lacks prometheus-client must lose /metrics only, not every URL of the site.
    from prometheus_client import CONTENT_TYPE_LATEST

    from jobs.metrics import render

    return HttpResponse(render(), content_type=CONTENT_TYPE_LATEST)
