"""The pure core: decisions, the gate, the results and the views the adapters hand in. No I/O here."""
