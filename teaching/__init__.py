"""Teaching code, not part of the installed package: the textbook continuous mechanisms."""
