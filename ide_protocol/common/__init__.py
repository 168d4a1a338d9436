"""What both sides of the `/ide` protocol share above the wire: the lock file (discovery,
PROTOCOL.md §1), paths and URIs (§6), the six tools' shapes (§4), and the Windows-only
named-pipe and pid code."""
