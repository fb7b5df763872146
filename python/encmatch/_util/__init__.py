"""Plumbing shared by the SDK, the domains and the command line: atomic files, journals, progress,
units, defaults and terminal output."""
