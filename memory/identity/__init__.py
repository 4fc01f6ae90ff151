"""Who is calling: API keys and the principal they authenticate, the keys' lifecycle, the console's
server-side sessions, and the ids a caller names or mnemo picks for one."""
