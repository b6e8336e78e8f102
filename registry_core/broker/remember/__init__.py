"""What a person told the broker to remember: tool policies, their file, action rules."""
