"""The chat: the conversation list, the transcript view, the composer, and the controller that
sends questions to the engine and turns its stream into what the view shows. `text/` lays out and
paints a message."""
