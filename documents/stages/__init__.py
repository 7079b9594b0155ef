"""The document pipeline's stage handlers, one module per stage."""
