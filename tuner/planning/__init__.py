"""What to relaunch next: the planning rules shared by the sweep, --dry-run and the screen."""
