"""``python -m study --dry-run``: every setting checked offline, no model loaded, the plan printed."""
