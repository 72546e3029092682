"""`parley`: the council from a terminal — `parley chat` (a Textual app) and `parley ask`
(for scripts), both over Parley's token API (`/api/v1/`)."""
