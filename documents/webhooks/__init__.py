"""Webhooks: the endpoints' messages sent from their own q2 queue (``delivery``).

Registering, listing and resending go through ``documents.services.webhooks``; the outbox rows
(``WebhookEndpoint``, ``WebhookMessage``, ``WebhookAttempt``) are in ``documents.models``.
"""
