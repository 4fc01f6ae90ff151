"""Resources: declared business types (seed 000 §2), their source records and search projection; read
through list / search / read (runs, policies, pages and MCP come later)."""
