"""What people read: the text, JSON and Markdown report, plan diffs, and the pictures."""
