"""The IDE side: the MCP application (`mcp`), the asyncio HTTP transport (`transport`),
the embedding API (`ide_server.IdeServer`, `threaded.ThreadedIdeServer`) and the
debounced pushes (`pushes`)."""
