"""End-to-end benchmark: a server process, a client process, and SQLite for comparison."""
