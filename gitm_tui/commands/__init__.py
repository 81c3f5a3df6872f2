"""One module per `gitm-tui` subcommand (gitm_tui/cli.py dispatches to them)."""
