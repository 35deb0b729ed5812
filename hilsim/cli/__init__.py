"""hilsim.cli: the command layer. One module per command (a group's module holds its
subcommands); ``main`` holds the group, its global options, the one-line errors and the
lazy command table; ``options`` the option parsing several commands share. A command
parses its options, makes one library call that returns a result object, and prints it."""
