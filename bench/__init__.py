"""Benchmarks of the job engine and the ingestion platform (see bench/README.md)."""
