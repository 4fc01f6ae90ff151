"""The MCP endpoint (/mcp): the official SDK's server over the resource reader and mnemo's memories."""
