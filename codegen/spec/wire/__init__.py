"""The wire plugin's input: schemas/wire/<wire>.json mapping files, read (rules), checked against the model and
the vendor SDKs (sdk, check) and merged (mapping) before any plugin runs; codegen/plugins/wire/ renders them."""
