"""`epoch-gate` without Pants: `main` parses the command line, `check` gathers the evidence for `judge`."""
