"""The prompt cache seen from the run: where the trailing runtime state goes (layout), why a request could not use
the cache (misses), the notes kept once per run, and `segue runs explain` (docs/cache.md)."""
