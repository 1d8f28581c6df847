"""The OpenAI Responses wire, in one place: `request` (request bodies, parsed responses, prompt_cache_key,
prewarm), `stream` (stream assembly), `stored` (stored bodies read back) and `history` (the SDK's input items as
`history=`)."""
