"""`kubelab ui`: the web page that draws each Service's path through every node's real rules (server.py
serves it, rules.py reads the rules, static/ holds the page)."""
