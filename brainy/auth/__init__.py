"""Who is asking: keys, bk1 tokens, issuers, principals (docs/keys.md)."""
