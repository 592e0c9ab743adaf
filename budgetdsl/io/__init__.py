"""Files and text at the edges: atomic writes, escaping for terminals and Markdown, exit codes, crash reports."""
