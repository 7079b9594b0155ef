"""``/api/.../access`` and ``/api/groups``: access lists of documents and collections, and a
workspace's groups (docs/permissions.md).

A document the caller may not see is a 404 here as everywhere; one they see but may not change
is a 403 with the reason. Bad principals are a 400 naming the first bad one; nothing changes.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from documents.api.errors import ApiError
from documents.api.parsers import BoundedJSONParser
from documents.api.serializers import StrictIn
from documents.api.views import ERRORS, TenantView
from documents.models import Collection, Document, WorkspaceGroup
from documents.selectors import access_document_to_manage
from documents.services.access import (
    MAX_BULK_DOCUMENTS,
    AccessInputError,
    AccessList,
    collection_access,
    collection_access_set,
    document_access,
    document_access_set,
    documents_access_set,
)
from documents.services.collections import collection_of
from documents.services.groups import (
    group_create,
    group_delete,
    group_member_add,
    group_member_remove,
    group_members,
    group_of,
    group_rename,
    groups_of,
)
from documents.texts import Text, gettext_noop

PRINCIPALS_HELP = "Principal keys: everyone, user:<id>, group:<id> (of this workspace)."


class AccessIn(StrictIn):
    inherit = serializers.BooleanField(
        required=False, default=False, help_text="A document: use its collection's list (send no principals)."
    )
    principals = serializers.ListField(
        child=serializers.JSONField(), required=False, max_length=100, help_text=PRINCIPALS_HELP
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # An empty body must not quietly mean "nobody": an own list is always sent explicitly.
        if not attrs.get("inherit") and "principals" not in attrs:
            raise serializers.ValidationError(
                {"principals": gettext_noop("Send principals, or inherit: true.")}
            )
        attrs.setdefault("principals", [])
        return attrs


class BulkAccessIn(AccessIn):
    document_ids = serializers.ListField(
        child=serializers.CharField(max_length=64), min_length=1, max_length=MAX_BULK_DOCUMENTS
    )


class AccessOut(serializers.Serializer[Any]):
    inherit = serializers.BooleanField(help_text="Whether the document uses its collection's list.")
    principals = serializers.ListField(child=serializers.CharField(), help_text="The list in force.")


class GroupIn(StrictIn):
    name = serializers.CharField(max_length=80)


class MemberIn(StrictIn):
    user_id = serializers.IntegerField()


class GroupOut(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    key = serializers.CharField(help_text="The principal key that names the group in access lists.")
    name = serializers.CharField()
    members = serializers.ListField(child=serializers.DictField(), help_text="{id, username, key} each.")


def access_out(found: AccessList) -> dict[str, Any]:
    return dict(AccessOut(found.as_dict()).data)


def group_out(group: WorkspaceGroup) -> dict[str, Any]:
    members = [
        {"id": u.pk, "username": u.get_username(), "key": f"user:{u.pk}"} for u in group_members(group)
    ]
    return dict(GroupOut({"id": group.pk, "key": group.key, "name": group.name, "members": members}).data)


def refused(exc: AccessInputError) -> ApiError:
    return ApiError(exc.status, exc.code, exc.message, {"field": exc.field})


def _not_found() -> ApiError:
    return ApiError(404, "not_found", gettext_noop("Not found."))


class DocumentAccessView(TenantView):
    parser_classes = [BoundedJSONParser]

    def document(self, document_id: Any) -> Document:
        found = access_document_to_manage(self.viewer, document_id)
        if found is None:
            raise _not_found()
        return found

    @extend_schema(operation_id="document_access_get", responses={200: AccessOut, **ERRORS})
    def get(self, request: Request, document_id: str) -> Response:
        return Response(access_out(document_access(self.document(document_id))))

    @extend_schema(operation_id="document_access_set", request=AccessIn, responses={200: AccessOut, **ERRORS})
    def put(self, request: Request, document_id: str) -> Response:
        """Set the document's own list, or ``inherit`` its collection's (its creator or a
        workspace admin)."""
        document = self.document(document_id)
        form = AccessIn(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        try:
            found = document_access_set(
                viewer=self.viewer,
                document=document,
                inherit=data["inherit"],
                principals=data["principals"],
                user=request.user,
            )
        except AccessInputError as exc:
            raise refused(exc) from None
        return Response(access_out(found))


class BulkAccessView(TenantView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(operation_id="documents_access_set", request=BulkAccessIn, responses={200: None, **ERRORS})
    def put(self, request: Request) -> Response:
        """One list (or ``inherit``) for many documents, all or none."""
        form = BulkAccessIn(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        documents = []
        for document_id in dict.fromkeys(data["document_ids"]):
            document = access_document_to_manage(self.viewer, document_id)
            if document is None:
                message = Text(
                    gettext_noop("No document %(id)s in your workspace."), id=str(document_id)[:64]
                )
                raise ApiError(400, "unknown_document", message, {"field": "document_ids"})
            documents.append(document)
        try:
            results = documents_access_set(
                viewer=self.viewer,
                documents=documents,
                inherit=data["inherit"],
                principals=data["principals"],
                user=request.user,
            )
        except AccessInputError as exc:
            raise refused(exc) from None
        return Response({"documents": [{"id": str(d.pk), **access_out(results[d.pk])} for d in documents]})


class CollectionAccessView(TenantView):
    parser_classes = [BoundedJSONParser]

    def collection(self, collection_id: str) -> Collection:
        found = collection_of(self.tenant, collection_id)
        if found is None:
            raise _not_found()
        return found

    @extend_schema(operation_id="collection_access_get", responses={200: AccessOut, **ERRORS})
    def get(self, request: Request, collection_id: str) -> Response:
        return Response(access_out(collection_access(self.collection(collection_id))))

    @extend_schema(
        operation_id="collection_access_set", request=AccessIn, responses={200: AccessOut, **ERRORS}
    )
    def put(self, request: Request, collection_id: str) -> Response:
        """Set the collection's default list (workspace admins); its inheriting documents follow
        in the same commit."""
        collection = self.collection(collection_id)
        form = AccessIn(data=request.data)
        form.is_valid(raise_exception=True)
        if form.validated_data["inherit"]:
            raise ApiError(
                400,
                "invalid_inherit",
                gettext_noop("A collection has no list to inherit."),
                {"field": "inherit"},
            )
        try:
            found = collection_access_set(
                viewer=self.viewer,
                collection=collection,
                principals=form.validated_data["principals"],
                user=request.user,
            )
        except AccessInputError as exc:
            raise refused(exc) from None
        return Response(access_out(found))


class GroupsView(TenantView):
    parser_classes = [BoundedJSONParser]

    @extend_schema(operation_id="groups_list", responses={200: GroupOut(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        return Response([group_out(g) for g in groups_of(self.tenant)])

    @extend_schema(operation_id="groups_create", request=GroupIn, responses={201: GroupOut, **ERRORS})
    def post(self, request: Request) -> Response:
        form = GroupIn(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            group = group_create(viewer=self.viewer, tenant=self.tenant, name=form.validated_data["name"])
        except AccessInputError as exc:
            raise refused(exc) from None
        return Response(group_out(group), status=status.HTTP_201_CREATED)


class GroupOfTenant(TenantView):
    parser_classes = [BoundedJSONParser]

    def group(self, group_id: str) -> WorkspaceGroup:
        found = group_of(self.tenant, group_id)
        if found is None:
            raise _not_found()
        return found


class GroupView(GroupOfTenant):
    @extend_schema(operation_id="groups_retrieve", responses={200: GroupOut, **ERRORS})
    def get(self, request: Request, group_id: str) -> Response:
        return Response(group_out(self.group(group_id)))

    @extend_schema(operation_id="groups_rename", request=GroupIn, responses={200: GroupOut, **ERRORS})
    def patch(self, request: Request, group_id: str) -> Response:
        group = self.group(group_id)
        form = GroupIn(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            group_rename(viewer=self.viewer, group=group, name=form.validated_data["name"])
        except AccessInputError as exc:
            raise refused(exc) from None
        return Response(group_out(group))

    @extend_schema(operation_id="groups_delete", request=None, responses={204: None, **ERRORS})
    def delete(self, request: Request, group_id: str) -> Response:
        try:
            group_delete(viewer=self.viewer, group=self.group(group_id))
        except AccessInputError as exc:
            raise refused(exc) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class GroupMembersView(GroupOfTenant):
    @extend_schema(operation_id="group_members_add", request=MemberIn, responses={200: GroupOut, **ERRORS})
    def post(self, request: Request, group_id: str) -> Response:
        group = self.group(group_id)
        form = MemberIn(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            group_member_add(viewer=self.viewer, group=group, user_id=form.validated_data["user_id"])
        except AccessInputError as exc:
            raise refused(exc) from None
        return Response(group_out(group))


class GroupMemberView(GroupOfTenant):
    @extend_schema(operation_id="group_members_remove", request=None, responses={200: GroupOut, **ERRORS})
    def delete(self, request: Request, group_id: str, user_id: str) -> Response:
        group = self.group(group_id)
        try:
            group_member_remove(
                viewer=self.viewer, group=group, user_id=int(user_id) if user_id.isdigit() else user_id
            )
        except AccessInputError as exc:
            raise refused(exc) from None
        return Response(group_out(group))
