"""The contracts between layers and the small helpers every layer uses, above the generated types: the driver
contract (ProviderRequest / ProviderResponse, stream events, Provider), canonical JSON and hashes, the token
counter, Python types <-> JSON Schema, cache-usage arithmetic and one-line run text. Not API: import the public
names from `segue` and the modules docs/api.md names."""
