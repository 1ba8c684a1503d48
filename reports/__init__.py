"""Reports: the audit (what was spent where) and its Markdown and HTML renderings, charts included."""
