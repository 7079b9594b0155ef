"""Admin glue for the operator actions: menu entries, 403, a confirmation page, one message per
outcome group.

The flow: the list (or the job page) posts the action with the selected ids and, per job, the
version that page rendered (``seen_version_<id>``). The first post renders a confirmation page
that asks for a reason and carries those versions on; the second post (``confirm=yes``) runs the
service once per job and reports what happened. A job whose version moved in between is a
conflict and is left alone.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.options import IS_POPUP_VAR
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from jobs.admin.actions import (
    CONFLICT,
    DONE,
    FORCE_RETRY,
    OPERATE,
    REFUSED,
    TAKEOVER,
    OperatorAction,
    all_actions,
    get_action,
    group_outcomes,
    has_power,
    perform,
)
from jobs.models import Job

MAX_BULK = 500
REASON_MAX = 400
LEVELS = {DONE: messages.SUCCESS, CONFLICT: messages.ERROR, REFUSED: messages.ERROR}


@dataclass(frozen=True)
class ConfirmRow:
    job: Job
    seen: int
    why_not: str | None

    @property
    def changed(self) -> bool:
        return self.job.version != self.seen


def _parse_ids(values: list[str]) -> list[uuid.UUID]:
    ids = []
    for value in values:
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            continue  # a tampered id selects nothing
    return list(dict.fromkeys(ids))


def _seen_version(request: HttpRequest, pk: Any) -> int | None:
    try:
        return int(request.POST[f"seen_version_{pk}"])
    except (KeyError, ValueError):
        return None


class OperatorActionsMixin(admin.ModelAdmin):
    """Operator actions for a job list. ``operator_action_names`` limits the menu (None: all)."""

    operator_action_names: tuple[str, ...] | None = None

    # --- permissions (also used by Django's ``allowed_permissions`` naming convention) ----------

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return has_power(request.user, OPERATE)

    def has_takeover_permission(self, request: HttpRequest) -> bool:
        return has_power(request.user, TAKEOVER)

    def has_force_retry_permission(self, request: HttpRequest) -> bool:
        return has_power(request.user, FORCE_RETRY)

    def may(self, request: HttpRequest, action: OperatorAction) -> bool:
        return has_power(request.user, action.permission)

    def operator_actions(self) -> list[OperatorAction]:
        actions = all_actions()
        if self.operator_action_names is None:
            return actions
        return [a for a in actions if a.name in self.operator_action_names]

    def available_actions(self, request: HttpRequest, job: Job) -> list[OperatorAction]:
        """The actions this operator may take on this job in its current state."""
        return [a for a in self.operator_actions() if self.may(request, a) and a.applies(job) is None]

    # --- the menu and the 403 --------------------------------------------------------------------

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        if self.actions is None or IS_POPUP_VAR in request.GET:
            return {}
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # jobs are never deleted from the admin
        for action in self.operator_actions():
            if self.may(request, action):
                actions[action.name] = (self._admin_action(action), action.name, action.label)
        return actions

    @staticmethod
    def _admin_action(action: OperatorAction) -> Any:
        def run(modeladmin: OperatorActionsMixin, request: HttpRequest, queryset: QuerySet[Job]) -> Any:
            return modeladmin.run_operator_action(request, queryset, action)

        run.__name__ = action.name
        return run

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if request.method == "POST":
            # Django would silently drop an action missing from the menu; a post of an action
            # this operator may not take is refused outright instead.
            action = get_action(self._posted_action_name(request))
            if action is not None and not self.may(request, action):
                raise PermissionDenied
        return super().changelist_view(request, extra_context)

    @staticmethod
    def _posted_action_name(request: HttpRequest) -> str:
        names = request.POST.getlist("action")
        try:
            index = int(request.POST.get("index", 0))
        except ValueError:
            index = 0
        return names[index] if 0 <= index < len(names) else ""

    # --- one action on the selection ---------------------------------------------------------

    def run_operator_action(
        self, request: HttpRequest, queryset: QuerySet[Job], action: OperatorAction
    ) -> HttpResponse | None:
        if not self.may(request, action):
            raise PermissionDenied
        ids = self._selected_ids(request, queryset)
        if len(ids) > MAX_BULK:
            self.message_user(request, f"Select at most {MAX_BULK} jobs for one action.", messages.ERROR)
            return None
        jobs = Job.objects.in_bulk(ids)
        if request.POST.get("confirm") != "yes":
            return self._confirmation(request, action, [jobs[pk] for pk in ids if pk in jobs])
        reason = request.POST.get("reason", "").strip()[:REASON_MAX] or f"{action.label} (no reason given)"
        who = request.user.get_username()
        outcomes = [
            perform(action, jobs.get(pk), pk, _seen_version(request, pk), actor_name=who, reason=reason)
            for pk in ids
        ]
        for group in group_outcomes(outcomes):
            self.message_user(request, group.text(action), LEVELS.get(group.result, messages.WARNING))
        return self._redirect_next(request)

    def _selected_ids(self, request: HttpRequest, queryset: QuerySet[Job]) -> list[uuid.UUID]:
        # The posted ids, not the list's current queryset: a job that left a filtered list (the
        # stalled list, say) since the page was rendered must be reported, not silently dropped.
        if request.POST.get("select_across") in ("1", "True", "true"):
            return list(queryset.values_list("pk", flat=True)[: MAX_BULK + 1])
        return _parse_ids(request.POST.getlist(ACTION_CHECKBOX_NAME))

    def _confirmation(self, request: HttpRequest, action: OperatorAction, jobs: list[Job]) -> HttpResponse:
        rows = []
        for job in jobs:
            # A job selected "across pages" was never rendered: the version shown here is the
            # one the operator confirms.
            seen = _seen_version(request, job.pk)
            rows.append(ConfirmRow(job, job.version if seen is None else seen, action.applies(job)))
        context = {
            **self.admin_site.each_context(request),
            "title": action.label,
            "opts": self.model._meta,
            "action": action,
            "rows": rows,
            "will_run": sum(1 for r in rows if r.why_not is None and not r.changed),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "next": request.POST.get("next", ""),
            "reason_max": REASON_MAX,
            "media": self.media,
        }
        return TemplateResponse(request, "admin/jobs/confirm_action.html", context)

    @staticmethod
    def _redirect_next(request: HttpRequest) -> HttpResponse | None:
        target = request.POST.get("next", "")
        if target and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            return HttpResponseRedirect(target)
        return None  # Django goes back to the list

    # --- the version column every list renders ----------------------------------------------

    @admin.display(description="version")
    def seen_version(self, job: Job) -> str:
        """The version this page shows, posted back with an action so a stale page conflicts."""
        return format_html(
            'v{}<input type="hidden" name="seen_version_{}" value="{}">', job.version, job.pk, job.version
        )
