"""Examples of task types built on mnemo's public API only; not part of the installed package."""
