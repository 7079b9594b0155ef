"""Token authentication that also finds the user's workspace, in one query.

Every API request needs the user and then the tenant; DRF's ``TokenAuthentication`` reads the
token and user, and the tenant would cost a second query. Here the membership is fetched by the
token key with the user, the token and the tenant joined, and the tenant is remembered on the
user for :func:`documents.selectors.tenant_for`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed, Throttled

from documents.models import Membership
from documents.selectors import remember_tenant
from documents.throttles import token_failure_record

if TYPE_CHECKING:
    from rest_framework.request import Request


def user_for_token(key: str) -> tuple[Any, Token] | None:
    """The user and token for ``key`` (with the user's tenant remembered), or None."""
    # At most one row (one token per key, one membership per user): no ORDER BY to build or run,
    # which .first() would add (every API request pays this query's Python).
    found = Membership.objects.select_related("tenant", "user__auth_token").filter(user__auth_token__key=key)
    membership = next(iter(found.order_by()[:1]), None)
    if membership is not None:
        user = membership.user
        remember_tenant(user, membership.tenant)
        return user, user.auth_token
    # A valid token of a user in no workspace (answered 403 later), or no such token.
    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None:
        return None
    remember_tenant(token.user, None)
    return token.user, token


class TenantTokenAuthentication(TokenAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Token] | None:
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            # Counted only on failure: a good token costs no extra query (clients poll), and a
            # guesser past the limit is answered 429 for the rest of the window.
            if token_failure_record(request) > int(settings.AUTH_FAILURE_LIMIT_PER_ADDRESS):
                raise Throttled(wait=float(settings.AUTH_FAILURE_WINDOW_SECONDS)) from None
            raise

    def authenticate_credentials(self, key: str) -> tuple[Any, Token]:
        found = user_for_token(key)
        if found is None:
            raise AuthenticationFailed(_("Invalid token."))
        if not found[0].is_active:
            raise AuthenticationFailed(_("User inactive or deleted."))
        return found
