"""The replay's judge, trusted: it reads the world, runs the predicates (oracle code) and writes the
evidence, and never runs product code (`parent`, `judging`, and `channel`, its side of each child)."""
