"""Table and input contracts (StructTypes and the request-log JSON schema)."""
