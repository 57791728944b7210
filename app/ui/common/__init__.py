"""What every feature shares: the theme, background work off the GUI thread, the engine bridge,
error banners, the wait panel, platform words, plain-speed baselines, the words for an answer's
numbers, and the settings file. It imports no feature."""
