"""Skills (seed 004 §5.4, §11): procedures as files, resolved per request SYSTEM → TENANT → AGENT, field by field.

A skill is a directory holding ``SKILL.md``; it is never a memory (seed 004 P10): nothing here writes to a user's
memories, and recall carries skills in a section of their own.
"""
