"""Pure input-handling engines: type sniffing, upload validation and parsing (no database)."""
