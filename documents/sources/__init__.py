"""Sources: where documents come from (a folder under an allowed root, later web sites and
S3-compatible buckets), kept in sync by the ``document.sync`` job kind (docs/sources.md)."""
