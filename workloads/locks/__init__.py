"""Lock implementations, each a class that declares itself (name, summary, dbs, tokens)."""
