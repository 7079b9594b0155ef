"""Throttles and the login lockout, counted in a store every web process shares.

Counters live in the ``throttle`` cache: Django's database cache on the embedded default, Redis
when ``THROTTLE_REDIS_URL`` is set (or the q2 broker is Redis). Never per-process memory: with
several web processes a per-process counter multiplies every limit (docs/limits.md).
The client address is the socket's unless ``TRUSTED_PROXY_COUNT`` proxies are configured
(DRF's ``NUM_PROXIES``), so a forged ``X-Forwarded-For`` cannot pick a fresh counter per request.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.cache import caches
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.exceptions import Throttled
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

if TYPE_CHECKING:  # DRF's views import the authentication classes, which import this module
    from rest_framework.request import Request
    from rest_framework.views import APIView


def throttle_cache() -> Any:
    return caches["throttle"]


class _Scoped(SimpleRateThrottle):
    """A rate per user or per client address for one scope; ``methods`` limits what counts."""

    methods: frozenset[str] = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
    per_user = True

    def __init__(self) -> None:
        self.cache = throttle_cache()
        super().__init__()

    def get_rate(self) -> str | None:
        # Read at each request, not frozen at import as DRF's class attribute is.
        from rest_framework.settings import api_settings

        rate = api_settings.DEFAULT_THROTTLE_RATES.get(str(self.scope))
        return str(rate) if rate else None

    def allow_request(self, request: Request, view: APIView) -> bool:
        if request.method not in self.methods:
            return True
        return super().allow_request(request, view)

    def charge(self, request: Request, view: APIView, count: int) -> bool:
        """Add ``count`` requests to the history; True when they do not fit (nothing is added)."""
        if request.method not in self.methods or self.rate is None:
            return False
        num_requests, duration = self.parse_rate(self.rate)
        self.key = self.get_cache_key(request, view)
        if self.key is None or num_requests is None or duration is None:
            return False
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - duration:
            self.history.pop()
        if len(self.history) + count > num_requests:
            return True
        self.history[:0] = [self.now] * count
        self.cache.set(self.key, self.history, duration)
        return False

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        if self.per_user:
            if not (request.user and request.user.is_authenticated):
                return None  # anonymous requests are answered 401 and counted per address
            ident = str(request.user.pk)
        else:
            ident = self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


class UploadUserThrottle(_Scoped):
    scope = "upload_user"
    methods = frozenset({"POST"})


class UploadAddressThrottle(_Scoped):
    scope = "upload_ip"
    methods = frozenset({"POST"})
    per_user = False


class SearchUserThrottle(_Scoped):
    scope = "search_user"


class SearchAddressThrottle(_Scoped):
    scope = "search_ip"
    per_user = False


class WebhookUserThrottle(_Scoped):
    """Registering or changing webhook endpoints: each resolves a host name chosen by the caller."""

    scope = "webhook_user"
    methods = frozenset({"POST", "PUT", "PATCH"})


class WriteUserThrottle(_Scoped):
    """Every other change (collections, webhooks, re-index, cancel, delete...): the default."""

    scope = "write_user"
    methods = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class WriteAddressThrottle(_Scoped):
    scope = "write_ip"
    methods = frozenset({"POST", "PUT", "PATCH", "DELETE"})
    per_user = False


UPLOAD_THROTTLES: list[type[BaseThrottle]] = [UploadUserThrottle, UploadAddressThrottle]
WRITE_THROTTLES: list[type[BaseThrottle]] = [WriteUserThrottle, WriteAddressThrottle]
SEARCH_THROTTLES: list[type[BaseThrottle]] = [SearchUserThrottle, SearchAddressThrottle]


def throttle_charge(request: Request, view: APIView, throttles: list[type[BaseThrottle]], count: int) -> None:
    """Count ``count`` more requests against ``throttles`` at once, or refuse with 429.

    A request that starts many uploads (a batch, a vector store created with ``file_ids``) costs
    what as many single uploads would: otherwise one batch of 100 files per request would pass
    a rate of uploads per minute a hundred times over. The request itself was counted once by the
    view's throttles already; nothing is counted when the whole charge does not fit.
    """
    for throttle_class in throttles:
        throttle = throttle_class()
        if count <= 0 or not isinstance(throttle, _Scoped) or not throttle.charge(request, view, count):
            continue
        raise Throttled(wait=throttle.wait())


def most_at_once(throttles: list[type[BaseThrottle]]) -> int | None:
    """The most requests one charge of ``throttles`` can ever hold: the smallest count of their
    rates in force (None: no rate). A request that costs more than this never fits, however long
    its client waits, so it is refused as too large rather than told to retry later."""
    counts = []
    for throttle_class in throttles:
        throttle = throttle_class()
        if isinstance(throttle, _Scoped) and throttle.rate is not None:
            num_requests, _ = throttle.parse_rate(throttle.rate)
            if num_requests is not None:
                counts.append(num_requests)
    return min(counts) if counts else None


def page_throttled(request: HttpRequest, throttles: list[type[BaseThrottle]]) -> bool:
    """Whether a page request (upload form, search page) is over one of the API's rates: the
    pages count in the same counters, so they are no way around the API's throttles."""
    return not all(throttle().allow_request(request, None) for throttle in throttles)  # type: ignore[arg-type]


# --- failed credentials -------------------------------------------------------------------------


def client_address(request: HttpRequest | Request) -> str:
    """The client's address as the throttles see it (see the module docstring)."""
    return str(BaseThrottle().get_ident(request))  # type: ignore[arg-type]


def _key(kind: str, value: str) -> str:
    # Hashed: user names and tokens may hold characters some cache backends refuse in keys.
    return f"authfail:{kind}:{hashlib.sha256(value.encode()).hexdigest()[:32]}"


def _count(key: str, window: float) -> int:
    cache = throttle_cache()
    if cache.add(key, 1, timeout=window):
        return 1
    try:
        return int(cache.incr(key))
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=window)
        return 1


def _over(key: str, limit: int) -> bool:
    return int(throttle_cache().get(key, 0)) >= limit


def token_failure_record(request: HttpRequest | Request) -> int:
    """Count a bad token from this address; how many it sent within the window."""
    return _count(_key("token-ip", client_address(request)), settings.AUTH_FAILURE_WINDOW_SECONDS)


class LockoutModelBackend(ModelBackend):
    """Django's password backend with a lockout: after ``LOGIN_FAILURE_LIMIT`` wrong passwords for
    one user name from one client address (or ``AUTH_FAILURE_LIMIT_PER_ADDRESS`` from one address,
    whatever the user names) within ``AUTH_FAILURE_WINDOW_SECONDS``, every attempt from that
    address is refused, the right password included, until the window passes. Counted per (user
    name, address) pair, not per user name: someone elsewhere guessing a user's password cannot
    lock that user out. Used by the HTML login and the admin login alike."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        address = client_address(request) if request is not None else ""
        pair_key = _key("login-user-ip", f"{address} {(username or '').casefold()}")
        address_key = _key("login-ip", address) if request is not None else None
        if _over(pair_key, settings.LOGIN_FAILURE_LIMIT) or (
            address_key and _over(address_key, settings.AUTH_FAILURE_LIMIT_PER_ADDRESS)
        ):
            raise PermissionDenied("too many failed logins")  # stops authenticate() at this backend
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            window = settings.AUTH_FAILURE_WINDOW_SECONDS
            _count(pair_key, window)
            if address_key:
                _count(address_key, window)
        return user
