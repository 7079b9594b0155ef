"""The OpenAI-compatible API under ``/v1/`` (Files, Vector stores), on the same services,
tenancy and token model as ``/api/``."""
