"""`memoryd mcp`: memoryd's tools over the Model Context Protocol (stdio or streamable
HTTP), each call authorised by an API key exactly as the HTTP API authorises a request.

tools.py defines the tools and needs only memoryd; server.py serves them and imports the
MCP SDK (the `mcp` extra), so `import memoryd` never does.

May import: client, errors, models, recall, server, settings.
"""
