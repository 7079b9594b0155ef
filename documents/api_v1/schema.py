"""Serializers that document /v1's bodies in the OpenAPI schema (the views parse and check the
input themselves, with OpenAI's parameter names in their errors)."""

from __future__ import annotations

from rest_framework import serializers

Dict = serializers.DictField


class FileCountsOut(serializers.Serializer):
    in_progress = serializers.IntegerField()
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    total = serializers.IntegerField()


class ExpiresAfter(serializers.Serializer):
    anchor = serializers.ChoiceField(choices=["last_active_at"])
    days = serializers.IntegerField(min_value=1, max_value=365)


class VectorStoreIn(serializers.Serializer):
    name = serializers.CharField(required=False)
    metadata = Dict(child=serializers.CharField(), required=False)
    expires_after = ExpiresAfter(required=False, allow_null=True)
    chunking_strategy = Dict(
        required=False, help_text="{'type': 'auto'} or {'type': 'static', 'static': {...}}"
    )
    file_ids = serializers.ListField(child=serializers.CharField(), required=False)


class VectorStoreUpdateIn(serializers.Serializer):
    name = serializers.CharField(required=False)
    metadata = Dict(child=serializers.CharField(), required=False)
    expires_after = ExpiresAfter(required=False, allow_null=True)


class VectorStoreOut(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    created_at = serializers.IntegerField()
    name = serializers.CharField()
    usage_bytes = serializers.IntegerField()
    file_counts = FileCountsOut()
    status = serializers.ChoiceField(choices=["in_progress", "completed"])
    expires_after = ExpiresAfter(allow_null=True)
    expires_at = serializers.IntegerField(allow_null=True)
    last_active_at = serializers.IntegerField(allow_null=True)
    metadata = Dict(child=serializers.CharField())


class LastErrorOut(serializers.Serializer):
    code = serializers.ChoiceField(
        choices=["server_error", "unsupported_file", "invalid_file", "rate_limit_exceeded"]
    )
    message = serializers.CharField()


class VectorStoreFileIn(serializers.Serializer):
    file_id = serializers.CharField()
    attributes = Dict(required=False)
    chunking_strategy = Dict(required=False)


class AttributesIn(serializers.Serializer):
    attributes = Dict()


class VectorStoreFileOut(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    created_at = serializers.IntegerField()
    vector_store_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["in_progress", "completed", "failed", "cancelled"])
    last_error = LastErrorOut(allow_null=True)
    usage_bytes = serializers.IntegerField()
    attributes = Dict()
    chunking_strategy = Dict(
        help_text="the sizes the chunker used: {'type': 'static', 'static': {'max_chunk_size_tokens': n, "
        "'chunk_overlap_tokens': m}}"
    )
    document_id = serializers.CharField(help_text="ours: the file's document")
    job_id = serializers.CharField(allow_null=True, help_text="ours: its processing job")
    stage = serializers.CharField(allow_null=True, help_text="ours: the job's stage")
    job_status = serializers.CharField(allow_null=True, help_text="ours: the job's status")
    progress = serializers.FloatField(help_text="ours: 0-1")


class FileBatchIn(serializers.Serializer):
    file_ids = serializers.ListField(child=serializers.CharField(), required=False)
    files = VectorStoreFileIn(many=True, required=False)
    attributes = Dict(required=False)
    chunking_strategy = Dict(required=False)


class FileBatchOut(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    created_at = serializers.IntegerField()
    vector_store_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["in_progress", "completed", "cancelled"])
    file_counts = FileCountsOut()


class HybridSearch(serializers.Serializer):
    embedding_weight = serializers.FloatField(min_value=0, max_value=1, required=False)
    text_weight = serializers.FloatField(min_value=0, max_value=1, required=False)


class RankingOptions(serializers.Serializer):
    ranker = serializers.ChoiceField(choices=["auto", "default-2024-11-15", "none"], required=False)
    score_threshold = serializers.FloatField(
        min_value=0,
        max_value=1,
        required=False,
        help_text="on the fused score: 1 is first in every list, each fully trusted",
    )
    hybrid_search = HybridSearch(
        required=False, help_text="weights of the lists (default: the vector store's own)"
    )


class SearchIn(serializers.Serializer):
    query = serializers.JSONField(help_text="a string or a list of strings")
    filters = Dict(required=False, help_text="comparison or compound filter over attributes")
    max_num_results = serializers.IntegerField(min_value=1, max_value=50, required=False)
    ranking_options = RankingOptions(required=False)
    rewrite_query = serializers.BooleanField(required=False, help_text="accepted; does nothing")
    neighbours = serializers.IntegerField(
        min_value=0,
        max_value=5,
        required=False,
        help_text="extension: 0-5 chunks before and after each result, in result.neighbours",
    )


class TextOut(serializers.Serializer):
    type = serializers.CharField()
    text = serializers.CharField()


class V1NeighboursOut(serializers.Serializer):
    before = TextOut(many=True)
    after = TextOut(many=True)


class SearchResultOut(serializers.Serializer):
    file_id = serializers.CharField()
    filename = serializers.CharField()
    score = serializers.FloatField()
    attributes = Dict()
    content = TextOut(many=True)
    neighbours = V1NeighboursOut(required=False, help_text="extension: with neighbours=N in the request")


class SearchPageOut(serializers.Serializer):
    object = serializers.CharField()
    search_query = serializers.CharField()
    data = SearchResultOut(many=True)  # type: ignore[assignment]
    has_more = serializers.BooleanField()
    next_page = serializers.CharField(allow_null=True)


class ContentPageOut(serializers.Serializer):
    object = serializers.CharField()
    data = TextOut(many=True)  # type: ignore[assignment]
    has_more = serializers.BooleanField()
    next_page = serializers.CharField(allow_null=True)


def list_of(item: type[serializers.Serializer], name: str) -> type[serializers.Serializer]:
    class ListOut(serializers.Serializer):
        object = serializers.CharField()
        data = item(many=True)  # type: ignore[assignment]
        first_id = serializers.CharField(allow_null=True)
        last_id = serializers.CharField(allow_null=True)
        has_more = serializers.BooleanField()

    ListOut.__name__ = name
    return ListOut


VectorStoreListOut = list_of(VectorStoreOut, "VectorStoreListOut")
VectorStoreFileListOut = list_of(VectorStoreFileOut, "VectorStoreFileListOut")
