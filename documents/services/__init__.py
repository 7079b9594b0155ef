"""Every change to documents goes through these services."""
