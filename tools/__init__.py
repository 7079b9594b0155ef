"""Developer tooling that the Makefile runs (not part of the platform at run time)."""
