"""The API's service layer: what routers, the console and MCP call."""
