"""How a message's text is laid out and painted: markdown, streamed markdown, long pastes, wrapping
of long runs, the bubbles, and the draft highlighting drawn over tokens."""
