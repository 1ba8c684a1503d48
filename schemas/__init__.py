"""schemas: public, declarative descriptions of tables and releases, and their validation."""
