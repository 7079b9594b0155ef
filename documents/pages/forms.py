"""The upload form of the pages, and the words for a refused upload in the user's language."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_lazy as _

from documents import parsers
from documents.engines.validation import RejectCode, UploadRejected
from documents.models import Tenant
from documents.services.storage import StorageQuotaExceeded
from documents.services.upload_quotas import QUOTA_EXCEEDED
from documents.texts import Words, localize


class UploadForm(forms.Form):
    # Empty files are the upload service's to refuse (400, file_empty), like every other check:
    # one set of rules for the API and the pages.
    file = forms.FileField(label=_("File"), allow_empty_file=True)
    title = forms.CharField(
        label=_("Title"),
        required=False,
        max_length=300,
        help_text=_("Optional. The file name is used when empty."),
    )
    # A new document's collection (the upload page offers the tenant's; empty: the default one).
    collection = forms.UUIDField(label=_("Collection"), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The types the parser registry holds, so a new parser's kind is offered with the others.
        self.fields["file"].help_text = _("%(types)s, up to %(limit)s.") % {
            "types": localize(Words(parsers.labels())),
            "limit": filesizeformat(settings.DOCUMENTS_MAX_UPLOAD_BYTES),
        }


class VersionUploadForm(UploadForm):
    """A new version of a document: an empty title keeps the document's title (the upload
    service changes it only when one is given)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["title"].help_text = _(
            "Optional. Empty keeps the current title; a title given here replaces it."
        )


# The fixed messages of documents/engines/validation.py and of the parsers' upload checks
# (documents/parsers/word.py), so that makemessages collects them (the unsupported type's
# refusal, which names the registry's types, is marked where it is made):
# a refusal is shown through gettext(message), which falls back to the service's own English
# text when a message changes and its translation has not caught up yet.
_FIXED_MESSAGES = (
    gettext_noop("The file is empty."),
    gettext_noop("The file name is not usable. Rename the file and upload it again."),
    gettext_noop("This DOCX file has too many internal parts to open safely."),
    gettext_noop("This DOCX file expands to more data than can be opened safely."),
    gettext_noop("This DOCX file has password-protected parts. Remove the password and upload it again."),
)


def rejection_message(exc: UploadRejected, tenant: Tenant) -> str:
    """The refusal's user-safe message, translated (its numbers come from the same settings)."""
    if exc.code == RejectCode.FILE_TOO_LARGE:
        return gettext("The file is larger than the limit of %(limit)s.") % {
            "limit": filesizeformat(settings.DOCUMENTS_MAX_UPLOAD_BYTES)
        }
    if exc.code == QUOTA_EXCEEDED:
        return gettext(
            "Your workspace already has %(limit)s documents waiting to be processed. "
            "Try again when some have finished."
        ) % {"limit": tenant.max_queued_jobs}
    if isinstance(exc, StorageQuotaExceeded):
        return gettext(
            "Your workspace stores %(used)s of its %(limit)s limit; this file (%(size)s) does not fit. "
            "Delete documents you no longer need (cancelled and failed versions count until they are "
            "freed) or ask an administrator for a larger limit."
        ) % {
            "used": filesizeformat(exc.used),
            "limit": filesizeformat(exc.limit),
            "size": filesizeformat(exc.adding),
        }
    return localize(exc.message)
