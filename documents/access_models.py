"""Who may find what inside a workspace: its groups, each document's effective grants and the
audit of access changes (imported by ``documents.models``).

A principal is named by a key: ``everyone`` (every member of the workspace), ``user:<id>`` or
``group:<id>`` (a :class:`WorkspaceGroup`, whose id is its ``auth.Group``'s). A collection holds
the default list, a document its own or none (it inherits). ``DocumentGrant`` holds, per
document, the keys of the list in force: search and every list join it, so a change of a
collection's list rewrites one row set per inheriting document and touches no chunk or vector.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

EVERYONE = "everyone"


class WorkspaceGroup(models.Model):
    """A group of one workspace's members: Django's ``auth.Group`` (members are its users, as
    everywhere in Django) tied to the tenant, with the name people see. The auth group's own
    name is ``<tenant slug>:<name>``, unique across workspaces as Django requires."""

    group = models.OneToOneField(
        Group, primary_key=True, on_delete=models.CASCADE, related_name="workspace_group"
    )
    tenant = models.ForeignKey("documents.Tenant", on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(_("name"), max_length=80)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("workspace group")
        verbose_name_plural = _("workspace groups")
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="workspace_group_name_once")]

    def __str__(self) -> str:
        return self.name

    @property
    def key(self) -> str:
        return f"group:{self.pk}"


class DocumentGrant(models.Model):
    """One principal allowed to find one document: the materialised list in force (its own,
    else its collection's), rewritten with that list in the same transaction."""

    document = models.ForeignKey("documents.Document", on_delete=models.CASCADE, related_name="grants")
    principal = models.CharField(max_length=40)

    class Meta:
        verbose_name = _("document grant")
        verbose_name_plural = _("document grants")
        constraints = [
            models.UniqueConstraint(fields=["document", "principal"], name="document_grant_once"),
        ]
        # The index queries test EXISTS (document, principal IN caller's keys): the unique
        # constraint's index serves it; this one serves "which documents may this group see".
        indexes = [models.Index(fields=["principal", "document"], name="document_grant_principal")]

    def __str__(self) -> str:
        return f"{self.principal} -> {self.document_id}"


class AccessChange(models.Model):
    """The audit of one access change: who, when, which document or collection, from what list
    to what (``{"inherit": bool, "principals": [...]}``). Append-only."""

    tenant = models.ForeignKey("documents.Tenant", on_delete=models.CASCADE, related_name="+")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_by_name = models.CharField(_("changed by"), max_length=150, blank=True, default="")
    changed_at = models.DateTimeField(_("changed at"), default=timezone.now)
    subject_type = models.CharField(_("subject type"), max_length=16)  # document, collection
    subject_id = models.CharField(_("subject id"), max_length=64)
    subject_name = models.CharField(_("subject"), max_length=300, blank=True, default="")
    before = models.JSONField(_("from"), default=dict)
    after = models.JSONField(_("to"), default=dict)

    class Meta:
        verbose_name = _("access change")
        verbose_name_plural = _("access changes")
        ordering = ["-changed_at", "-pk"]
        indexes = [models.Index(fields=["tenant", "-changed_at"], name="access_change_recent")]

    def __str__(self) -> str:
        return f"{self.subject_type} {self.subject_name or self.subject_id}"
