"""Accounts: users belong to exactly one tenant."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify
from rest_framework.authtoken.models import Token

from documents.models import Membership, Tenant


def user_create_in_tenant(*, username: str, tenant_slug: str, password: str | None = None) -> str:
    """Create the user (or reuse it) as a member of the tenant (created if missing); return a
    token for the API. A user already in another tenant is refused."""
    slug = slugify(tenant_slug)
    if not slug:
        raise ValidationError("The tenant slug must contain letters or digits.")
    with transaction.atomic():
        tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults={"name": tenant_slug})
        user, _ = get_user_model().objects.get_or_create(username=username)
        if password:
            user.set_password(password)
            user.save(update_fields=["password"])
        membership = Membership.objects.filter(user=user).select_related("tenant").first()
        if membership is None:
            Membership.objects.create(user=user, tenant=tenant)
        elif membership.tenant_id != tenant.pk:
            raise ValidationError(f"{username} already belongs to the tenant {membership.tenant.slug}.")
        token, _ = Token.objects.get_or_create(user=user)
    return str(token.key)
