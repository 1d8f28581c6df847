"""The Anthropic Messages wire, in one place: `request` (request bodies, parsed responses, breakpoints, prewarm),
`stream` (stream assembly), `stored` (stored bodies read back) and `history` (the SDK's message shapes as
`history=`)."""
