"""The CLI's side of the `/ide` protocol: discovery, the handshake, tools and pushes
(`ide_client.IdeClient`), as Copilot CLI speaks it."""
