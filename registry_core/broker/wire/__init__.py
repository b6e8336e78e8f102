"""What travels on the broker socket: messages, their codec and framing, the client."""
