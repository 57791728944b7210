"""The decode loop and what it stands on: loading a pair, the chat session's caches, drafting,
sampling, acceptance, prompt lookup, detokenizing and chat templates. Nothing here decides how
long to draft; a `DraftPolicy` from `app.engine.policy` (or a simple one here) does."""
