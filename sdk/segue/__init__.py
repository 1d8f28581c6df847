"""segue."""
