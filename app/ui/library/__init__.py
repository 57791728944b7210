"""What models the user has: model folders, downloads, GGUF import, the welcome and empty-library
screens."""
