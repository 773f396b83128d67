"""One module per `icebox-bench` subcommand; each has `add_parser(subparsers)`."""
