"""P4-16 frontend: preprocessor, parser, checker."""
