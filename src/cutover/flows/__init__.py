"""The stories: each phase and command, told with the adapters and decided by the core."""
