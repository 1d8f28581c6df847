"""OpenRouter's wire (Chat Completions with block breakpoints and `reasoning_details`), in one place: `request`
(request bodies on top of the Chat Completions wire), `stored` (stored bodies read back) and `history`
(`reasoning_details` given as `history=`). Its stream is Chat Completions' (`segue.wire.openai_chat.stream`)."""
