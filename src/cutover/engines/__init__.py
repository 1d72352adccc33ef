"""The engines: their kinds, the name proof over their HTTP API, trials, fitness and SSE."""
