"""Prefect flows of dprelease and its command-line entry point."""
