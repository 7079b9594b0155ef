"""Retrieval evaluation: labelled query sets of a collection, evaluation runs (a job kind,
``documents/kinds/evaluate.py``), the pure ranking metrics they compute (``metrics``) and the
comparison of two runs (``compare``). docs/evaluation.md explains them for users."""
