"""gitm-tui engine: UI-free core."""
