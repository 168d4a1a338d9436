"""The sans-IO wire core: bytes in, events out; events in, bytes out.

HTTP/1.1 (`http11`), server-sent events (`sse`), newline-delimited JSON (`ndjson`) and
JSON-RPC 2.0 messages (`jsonrpc`). No module in this package touches a socket, a loop, a
thread, a process or a file: state lives in the parser objects, and the asyncio layers
above (`server`, `client`, `rpc`, `acp`) own every I/O. A test enforces this.
"""
