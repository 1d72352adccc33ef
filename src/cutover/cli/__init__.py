"""The command line: parsing, dispatch, and how results are shown."""
