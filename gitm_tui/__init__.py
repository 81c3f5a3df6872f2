"""gitm-tui terminal front end."""
