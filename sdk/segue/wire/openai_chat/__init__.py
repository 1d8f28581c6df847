"""The Chat Completions wire, in one place: `request` (request bodies and parsed responses), `stream` (stream
assembly, OpenRouter's too), `stored` (stored bodies read back) and `history` (the SDK's message shapes as
`history=`)."""
