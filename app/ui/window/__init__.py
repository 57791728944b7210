"""The main window's own parts: menus, the chat's actions that reach several features, the
saved window state, the pair loaded at start, notices, and the Help and View dialogs."""
