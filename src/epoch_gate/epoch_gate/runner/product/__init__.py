"""The replay's child, untrusted: the only process that runs product code (`child`), answering every call
with data (`data`). Nothing it says is believed: the judge parses and checks it."""
