"""Command-line programs: ollie-tools, ollie-broker, ollie-askpass, ollie-elevate."""
