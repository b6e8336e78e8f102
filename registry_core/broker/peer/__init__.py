"""Who is on the other end of a connection, and whether it runs inside a sandbox."""
