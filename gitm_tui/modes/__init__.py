"""The app's modes, one Screen each (dashboard, analysis, audit); gitm_tui/app.py holds them."""
