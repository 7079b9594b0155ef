"""Every state change of a job goes through these services (see the modules for each use case)."""
