"""What generated code calls and everything else may use: the converter hooks, the readers the generated wire
parsers call, where the packaged data lives. Imports nothing of segue but `segue.errors`, so generated code
(which imports only this folder) sits above it without a circle."""
