"""The `fioprobe` command line: `main` (the command table, the parser, exit statuses), one
module per command (`<command>_cmd`), the options several commands share (`options`) and the
bounded types of every numeric option (`argtypes`).

Why a package: each command's options and its run read together, in a module of their own,
and an option two commands take is declared once. The command modules are named
`<command>_cmd` so that `probe_cmd` is never mistaken for the `fioprobe.probe` package that
does the work.
"""
