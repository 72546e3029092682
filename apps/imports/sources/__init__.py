"""Reading an export file, one conversation at a time, whatever made it."""
