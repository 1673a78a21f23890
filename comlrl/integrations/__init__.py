"""Optional integrations with other frameworks; each needs its own extra, and nothing in the core imports them."""
